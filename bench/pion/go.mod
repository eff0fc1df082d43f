// go.mod — only for the build: in GOPATH mode (GO111MODULE=off, GOPATH=<build>/gopath:/usr/share/gocode,
// bench/CMakeLists.txt) a go.mod above the sources lets them import github.com/pion/webrtc/v3 from
// Debian's golang-github-pion-webrtc.v3-dev ("minimal module compatibility"). Nothing is downloaded.
module rtcedge

go 1.19
