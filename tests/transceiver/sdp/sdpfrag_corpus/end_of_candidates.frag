a=ice-ufrag:EsAw
a=ice-pwd:bP+XJMM09aR8AiX1jdukzR6Y
m=audio 9 UDP/TLS/RTP/SAVPF 0
a=mid:0
a=end-of-candidates
