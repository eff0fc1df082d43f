a=ice-options:trickle ice2
a=ice-ufrag:Qk3R
a=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg
m=audio 9 UDP/TLS/RTP/SAVPF 111
a=mid:0
a=candidate:1467250027 1 udp 2122260223 192.168.0.196 46243 typ host generation 0 ufrag Qk3R network-id 1 network-cost 10
a=candidate:842163049 1 udp 1686052607 198.51.100.14 46243 typ srflx raddr 192.168.0.196 rport 46243 generation 0 ufrag Qk3R network-id 1 network-cost 10
a=end-of-candidates
