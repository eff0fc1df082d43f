a=ice-pwd:asd88fgpdd777uzjYhagZg
a=ice-ufrag:8hhY
m=audio 9 RTP/AVP 0
a=mid:1
a=candidate:1 1 UDP 1658497328 198.51.100.33 5000 typ host
a=candidate:2 1 UDP 1658497328 198.51.100.33 5002 typ host
a=end-of-candidates
