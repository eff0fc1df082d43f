// Command rtce_pion_echo is the Pion peer of bench/run_peers_bench.sh: a WebRTC audio echo
// server built with Pion (Debian's golang-github-pion-webrtc.v3-dev) the way Pion's own
// examples build one — default codecs and interceptors (NACK, RTCP reports, TWCC), one
// PeerConnection per session with its own UDP socket, the remote audio track's RTP written
// back on a local track. It speaks the transceiver's signaling, so the same clients drive
// both: POST /v1/sessions (application/sdp offer) answers 201 with the SDP answer (every
// candidate gathered, no trickle) and Location: /v1/sessions/<id>; DELETE on that
// location closes the session; GET /healthz answers 200.
//
// Only loopback candidates (interface lo, UDP over IPv4, no mDNS): a bench never sends
// anywhere else. The process exits by itself after -max-lifetime.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pion/ice/v2"
	"github.com/pion/interceptor"
	"github.com/pion/webrtc/v3"
)

type server struct {
	api         *webrtc.API
	maxSessions int

	mu       sync.Mutex
	nextID   uint64
	sessions map[string]*webrtc.PeerConnection
}

func newAPI() (*webrtc.API, error) {
	m := &webrtc.MediaEngine{}
	if err := m.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	i := &interceptor.Registry{}
	if err := webrtc.RegisterDefaultInterceptors(m, i); err != nil {
		return nil, err
	}
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetInterfaceFilter(func(name string) bool { return name == "lo" })
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	return webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(i), webrtc.WithSettingEngine(se)), nil
}

// answer builds one echoing PeerConnection for the offer and returns its complete answer.
func (s *server) answer(offer string) (string, string, error) {
	pc, err := s.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return "", "", err
	}
	fail := func(err error) (string, string, error) {
		pc.Close()
		return "", "", err
	}
	local, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus}, "audio", "rtce-pion-echo")
	if err != nil {
		return fail(err)
	}
	sender, err := pc.AddTrack(local)
	if err != nil {
		return fail(err)
	}
	// The interceptors act on RTCP only while someone reads it.
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := sender.Read(buf); err != nil {
				return
			}
		}
	}()
	pc.OnTrack(func(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		buf := make([]byte, 1500)
		for {
			n, _, err := remote.Read(buf)
			if err != nil {
				return
			}
			if _, err := local.Write(buf[:n]); err != nil && !errors.Is(err, io.ErrClosedPipe) {
				return
			}
		}
	})
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return fail(err)
	}
	desc, err := pc.CreateAnswer(nil)
	if err != nil {
		return fail(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(desc); err != nil {
		return fail(err)
	}
	<-gathered

	s.mu.Lock()
	s.nextID++
	id := fmt.Sprintf("pion-%d", s.nextID)
	s.sessions[id] = pc
	s.mu.Unlock()
	pc.OnConnectionStateChange(func(state webrtc.PeerConnectionState) {
		if state == webrtc.PeerConnectionStateFailed || state == webrtc.PeerConnectionStateClosed {
			s.remove(id)
		}
	})
	return pc.LocalDescription().SDP, id, nil
}

func (s *server) remove(id string) {
	s.mu.Lock()
	pc := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if pc != nil {
		go pc.Close() // Close waits for the goroutines of the session; not under the lock
	}
}

func (s *server) serveSessions(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sessions":
		s.mu.Lock()
		full := len(s.sessions) >= s.maxSessions
		s.mu.Unlock()
		if full {
			http.Error(w, "too many sessions", http.StatusServiceUnavailable)
			return
		}
		offer, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer, id, err := s.answer(string(offer))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/sdp")
		w.Header().Set("Location", "/v1/sessions/"+id)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, answer)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/sessions/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/sessions/")
		s.mu.Lock()
		_, ok := s.sessions[id]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		s.remove(id)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "HTTP signaling address (loopback)")
	maxSessions := flag.Int("max-sessions", 20000, "sessions at once; more answer 503")
	maxLifetime := flag.Duration("max-lifetime", 15*time.Minute, "exit after this long")
	flag.Parse()
	api, err := newAPI()
	if err != nil {
		log.Fatal(err)
	}
	s := &server{api: api, maxSessions: *maxSessions, sessions: map[string]*webrtc.PeerConnection{}}
	time.AfterFunc(*maxLifetime, func() {
		log.Printf("rtce_pion_echo: -max-lifetime %v reached, exiting", *maxLifetime)
		os.Exit(0)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/v1/sessions", s.serveSessions)
	mux.HandleFunc("/v1/sessions/", s.serveSessions)
	fmt.Printf("ready %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
