a=ice-ufrag:Qk3R
a=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg
