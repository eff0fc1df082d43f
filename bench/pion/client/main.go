// Command rtce_pion_client is the Pion load generator of bench/run_peers_bench.sh: N Pion
// PeerConnections (Debian's golang-github-pion-webrtc.v3-dev, default codecs and
// interceptors), each POSTing its complete offer (no trickle) to <url>/v1/sessions — the
// transceiver's signaling, which bench/pion/echo speaks too — and, once connected, sending
// one 20 ms Opus frame (the bytes of -opus-frame, the same frame rtce_session_loadgen sends)
// as RTP at 50 packets/s while counting the echoed frames that come back.
//
// Phases, each bounded: setup (paced at -setup-rate, until every session is connected or
// failed or -connect-timeout passed) -> -warmup -> the -seconds window (only echoed frames
// arriving inside it count) -> DELETE every session and close. It reports, like
// rtce_session_loadgen's JSON: sessions connected, frames received vs expected, intervals
// between echoed frames (arrival = when the reading goroutine got the packet, so they
// include this client's own scheduling), and with -server-pid the measured server's CPU,
// VmRSS idle and at the window's end, and each thread's context switches over the window.
// -window-command runs a command (a perf record) for the window. The process exits by
// itself after -max-lifetime.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/ice/v2"
	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v3"
)

const framePeriod = 20 * time.Millisecond

type options struct {
	url               string
	sessions          int
	seconds, warmup   float64
	setupRate         float64
	setupConcurrency  int
	connectTimeout    time.Duration
	opusFrame         string
	serverPID         int
	jsonOut, label    string
	windowCommand     string
	expectAllConnects bool
	maxLifetime       time.Duration
}

// base is the zero of every time this client records (monotonic).
var base = time.Now()

func since() int64 { return int64(time.Since(base)) }

var windowStart, windowEnd atomic.Int64 // ns since base; 0 until the window is known

// sendsLate counts packets sent in the window more than 5 ms after their 20 ms slot (the
// previous send + 20 ms): this client falling behind, which then measures the client.
var sendsLate atomic.Int64

type session struct {
	index    int
	pc       *webrtc.PeerConnection
	track    *webrtc.TrackLocalStaticRTP
	location string
	posted   int64

	mu           sync.Mutex
	connectedAt  int64
	failure      string
	firstEcho    int64
	received     uint64
	windowFrames uint64
	seqGaps      uint64
	intervals    []float32
	lastArrival  int64
	lastSeq      uint16
}

func (s *session) fail(reason string) {
	s.mu.Lock()
	if s.failure == "" && s.connectedAt == 0 {
		s.failure = reason
	}
	s.mu.Unlock()
}

// onEcho records one echoed RTP packet that arrived at `at`.
func (s *session) onEcho(seq uint16, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received++
	if s.firstEcho == 0 {
		s.firstEcho = at
	}
	if ws := windowStart.Load(); ws == 0 || at < ws || at >= windowEnd.Load() {
		return
	}
	if s.windowFrames > 0 {
		s.intervals = append(s.intervals, float32(float64(at-s.lastArrival)*1e-6))
		if step := seq - s.lastSeq; step > 1 && step < 1000 {
			s.seqGaps += uint64(step - 1)
		}
	}
	s.windowFrames++
	s.lastArrival = at
	s.lastSeq = seq
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

type client struct {
	opt     options
	api     *webrtc.API
	http    *http.Client
	frame   []byte
	stop    chan struct{}
	senders sync.WaitGroup
}

// setup opens session s: offer, POST, answer. Failures are recorded on s.
func (c *client) setup(s *session) {
	s.posted = since()
	pc, err := c.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		s.fail("peerconnection: " + err.Error())
		return
	}
	s.pc = pc
	track, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus}, "audio", "rtce-pion-client")
	if err != nil {
		s.fail("track: " + err.Error())
		return
	}
	s.track = track
	sender, err := pc.AddTrack(track)
	if err != nil {
		s.fail("add track: " + err.Error())
		return
	}
	go func() { // the interceptors act on RTCP only while someone reads it
		buf := make([]byte, 1500)
		for {
			if _, _, err := sender.Read(buf); err != nil {
				return
			}
		}
	}()
	pc.OnTrack(func(remote *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		for {
			pkt, _, err := remote.ReadRTP()
			if err != nil {
				return
			}
			s.onEcho(pkt.SequenceNumber, since())
		}
	})
	pc.OnConnectionStateChange(func(state webrtc.PeerConnectionState) {
		switch state {
		case webrtc.PeerConnectionStateConnected:
			s.mu.Lock()
			first := s.connectedAt == 0 && s.failure == ""
			if first {
				s.connectedAt = since()
			}
			s.mu.Unlock()
			if first {
				c.senders.Add(1)
				go c.send(s)
			}
		case webrtc.PeerConnectionStateFailed:
			s.fail("connection failed")
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		s.fail("offer: " + err.Error())
		return
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		s.fail("set local: " + err.Error())
		return
	}
	<-gathered
	var answer []byte
	for {
		resp, err := c.http.Post(c.opt.url+"/v1/sessions", "application/sdp", strings.NewReader(pc.LocalDescription().SDP))
		if err != nil {
			s.fail("http: " + err.Error())
			return
		}
		answer, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		// Rate limited or full: retry within the connect budget, as rtce_session_loadgen does.
		if (resp.StatusCode == 429 || resp.StatusCode == 503) && time.Duration(since()-s.posted) < c.opt.connectTimeout {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusCreated {
			s.fail(fmt.Sprintf("http %d: %.200s", resp.StatusCode, answer))
			return
		}
		s.location = resp.Header.Get("Location")
		break
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: string(answer)}); err != nil {
		s.fail("set remote: " + err.Error())
	}
}

// send writes one RTP packet with the shared Opus frame every 20 ms until stop.
func (c *client) send(s *session) {
	defer c.senders.Done()
	var seqTS [6]byte // random first sequence number and timestamp (RFC 3550 §5.1)
	if _, err := rand.Read(seqTS[:]); err != nil {
		return
	}
	pkt := rtp.Packet{
		Header: rtp.Header{Version: 2, PayloadType: 111, Marker: true,
			SequenceNumber: uint16(seqTS[0])<<8 | uint16(seqTS[1]),
			Timestamp:      uint32(seqTS[2])<<24 | uint32(seqTS[3])<<16 | uint32(seqTS[4])<<8 | uint32(seqTS[5])},
		Payload: c.frame,
	}
	ticker := time.NewTicker(framePeriod)
	defer ticker.Stop()
	last := int64(0)
	for {
		now := since()
		if ws := windowStart.Load(); last != 0 && ws != 0 && now >= ws && now < windowEnd.Load() &&
			time.Duration(now-last) > framePeriod+5*time.Millisecond {
			sendsLate.Add(1)
		}
		last = now
		if err := s.track.WriteRTP(&pkt); err != nil {
			return
		}
		pkt.Marker = false
		pkt.SequenceNumber++
		pkt.Timestamp += 960
		select {
		case <-c.stop:
			return
		case <-ticker.C:
		}
	}
}

// procSample is the measured server's state at one instant.
type procSample struct {
	cpuS    float64
	rssKiB  int64
	threads map[int]threadSample
}

type threadSample struct {
	name                    string
	voluntary, nonvoluntary int64
}

// clockTicks: USER_HZ, 100 on every Linux architecture Go runs the bench on.
const clockTicks = 100

func cpuSeconds(statPath string) float64 {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return -1
	}
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest) // f[0] is field 3 (state)
	if len(f) < 13 {
		return -1
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

func statusFields(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func sample(pid int) procSample {
	p := procSample{threads: map[int]threadSample{}}
	if pid == 0 {
		return p
	}
	dir := fmt.Sprintf("/proc/%d", pid)
	p.cpuS = cpuSeconds(dir + "/stat")
	rss := strings.TrimSuffix(statusFields(dir + "/status")["VmRSS"], " kB")
	p.rssKiB, _ = strconv.ParseInt(rss, 10, 64)
	tasks, _ := filepath.Glob(dir + "/task/*")
	for _, t := range tasks {
		tid, err := strconv.Atoi(filepath.Base(t))
		if err != nil {
			continue
		}
		st := statusFields(t + "/status")
		v, _ := strconv.ParseInt(st["voluntary_ctxt_switches"], 10, 64)
		nv, _ := strconv.ParseInt(st["nonvoluntary_ctxt_switches"], 10, 64)
		p.threads[tid] = threadSample{st["Name"], v, nv}
	}
	return p
}

func percentile(v []float64, q float64) interface{} {
	if len(v) == 0 {
		return nil
	}
	sort.Float64s(v)
	k := int(math.Ceil(q*float64(len(v)))) - 1
	if k < 0 {
		k = 0
	}
	return v[k]
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "http://127.0.0.1:8080", "signaling base URL (POST <url>/v1/sessions)")
	flag.IntVar(&o.sessions, "sessions", 10, "sessions to open")
	flag.Float64Var(&o.seconds, "seconds", 8, "measurement window (s)")
	flag.Float64Var(&o.warmup, "warmup", 2, "after the last setup, before the window (s)")
	flag.Float64Var(&o.setupRate, "setup-rate", 100, "offers posted per second (0 = unpaced)")
	flag.IntVar(&o.setupConcurrency, "setup-concurrency", 4, "setups in flight")
	flag.DurationVar(&o.connectTimeout, "connect-timeout", 15*time.Second, "POST start -> connected budget")
	flag.StringVar(&o.opusFrame, "opus-frame", "", "file with the one Opus frame every packet carries (rtce_session_loadgen --write-opus-frame)")
	flag.IntVar(&o.serverPID, "server-pid", 0, "the measured server: CPU, VmRSS, threads' context switches")
	flag.StringVar(&o.jsonOut, "json-out", "", "write the summary as JSON here")
	flag.StringVar(&o.label, "label", "", "a name for this run, copied into the output")
	flag.StringVar(&o.windowCommand, "window-command", "", "run with /bin/sh -c when the window opens")
	flag.BoolVar(&o.expectAllConnects, "expect-all-connected", false, "exit 1 unless every session connected and heard its echo")
	flag.DurationVar(&o.maxLifetime, "max-lifetime", 0, "exit (status 3) after this long (default: every phase's budget + 60 s)")
	flag.Parse()
	if o.sessions < 1 || o.sessions > 20000 || o.seconds <= 0 || o.setupConcurrency < 1 {
		log.Fatal("rtce_pion_client: -sessions 1..20000, -seconds > 0, -setup-concurrency >= 1")
	}
	if o.maxLifetime == 0 {
		setup := time.Duration(0)
		if o.setupRate > 0 {
			setup = time.Duration(float64(o.sessions) / o.setupRate * float64(time.Second))
		}
		o.maxLifetime = setup + o.connectTimeout + time.Duration((o.warmup+o.seconds)*float64(time.Second)) + 60*time.Second
	}
	time.AfterFunc(o.maxLifetime, func() {
		log.Printf("rtce_pion_client: -max-lifetime %v reached", o.maxLifetime)
		os.Exit(3)
	})
	frame := make([]byte, 80) // an Opus-sized payload when no frame is given
	if o.opusFrame != "" {
		var err error
		if frame, err = os.ReadFile(o.opusFrame); err != nil || len(frame) == 0 {
			log.Fatalf("rtce_pion_client: -opus-frame %s: %v", o.opusFrame, err)
		}
	}
	api, err := newAPI()
	if err != nil {
		log.Fatal(err)
	}
	c := &client{opt: o, api: api, frame: frame, stop: make(chan struct{}),
		http: &http.Client{Timeout: o.connectTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: o.setupConcurrency}}}

	idle := sample(o.serverPID)
	selfStart := cpuSeconds("/proc/self/stat")
	sessions := make([]*session, o.sessions)
	for i := range sessions {
		sessions[i] = &session{index: i}
	}
	// Setup: paced, -setup-concurrency at once.
	var next atomic.Int64
	var setups sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < o.setupConcurrency; w++ {
		setups.Add(1)
		go func() {
			defer setups.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= o.sessions {
					return
				}
				if o.setupRate > 0 {
					time.Sleep(time.Until(t0.Add(time.Duration(float64(i) / o.setupRate * float64(time.Second)))))
				}
				c.setup(sessions[i])
			}
		}()
	}
	setups.Wait()
	// Until every session connected or failed, within the connect budget of the last POST.
	deadline := time.Now().Add(o.connectTimeout)
	resolved := func() bool {
		for _, s := range sessions {
			s.mu.Lock()
			done := s.connectedAt != 0 || s.failure != ""
			s.mu.Unlock()
			if !done {
				return false
			}
		}
		return true
	}
	for !resolved() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	setupEnd := since()
	ws := since() + int64(o.warmup*float64(time.Second))
	we := ws + int64(o.seconds*float64(time.Second))
	windowEnd.Store(we)
	windowStart.Store(ws)
	time.Sleep(time.Duration(ws - since()))
	atStart := sample(o.serverPID)
	selfWindowStart := cpuSeconds("/proc/self/stat")
	var cmd *exec.Cmd
	if o.windowCommand != "" {
		cmd = exec.Command("/bin/sh", "-c", o.windowCommand)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			log.Printf("rtce_pion_client: -window-command: %v", err)
			cmd = nil
		}
	}
	time.Sleep(time.Duration(we - since()))
	atEnd := sample(o.serverPID)
	selfWindowEnd := cpuSeconds("/proc/self/stat")
	windowS := float64(since()-ws) * 1e-9
	close(c.stop)
	if cmd != nil {
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
	}

	// Summary, before anything is torn down.
	var connected, failed, withoutEcho int
	var frames, gaps, received uint64
	var pooled, ttc []float64
	failures := map[string]int{}
	for _, s := range sessions {
		s.mu.Lock()
		if s.connectedAt == 0 {
			failed++
			reason := s.failure
			if reason == "" {
				reason = "connect timeout"
			}
			failures[reason]++
		} else {
			connected++
			ttc = append(ttc, float64(s.connectedAt-s.posted)*1e-6)
			if s.received == 0 {
				withoutEcho++
			}
			frames += s.windowFrames
			gaps += s.seqGaps
			received += s.received
			for _, v := range s.intervals {
				pooled = append(pooled, float64(v))
			}
		}
		s.mu.Unlock()
	}
	expected := float64(connected) * float64(we-ws) / float64(framePeriod)
	ratio := 0.0
	if expected > 0 {
		ratio = float64(frames) / expected
	}
	threads := []map[string]interface{}{}
	for tid, t := range atEnd.threads {
		s := atStart.threads[tid]
		threads = append(threads, map[string]interface{}{"tid": tid, "name": t.name,
			"voluntary": t.voluntary - s.voluntary, "nonvoluntary": t.nonvoluntary - s.nonvoluntary})
	}
	sort.Slice(threads, func(a, b int) bool { return threads[a]["tid"].(int) < threads[b]["tid"].(int) })
	maxInterval := 0.0
	for _, v := range pooled {
		maxInterval = math.Max(maxInterval, v)
	}
	summary := map[string]interface{}{
		"label":                     o.label,
		"client":                    "rtce_pion_client",
		"target_kind":               "webrtc",
		"sessions_requested":        o.sessions,
		"sessions_connected":        connected,
		"sessions_failed":           failed,
		"failure_reasons":           failures,
		"sessions_without_echo":     withoutEcho,
		"setup_span_s":              float64(setupEnd) * 1e-9,
		"time_to_connected_ms":      map[string]interface{}{"p50": percentile(ttc, 0.5), "p99": percentile(ttc, 0.99)},
		"window_s":                  windowS,
		"frames_received_in_window": frames,
		"frames_expected_in_window": math.Round(expected),
		"frames_received_ratio":     ratio,
		"frames_missing_by_seq":     gaps,
		"rtp_received":              received,
		"frame_interval_ms":         map[string]interface{}{"p50": percentile(pooled, 0.5), "p99": percentile(pooled, 0.99), "max": maxInterval, "samples": len(pooled)},
		"opus_frame_bytes":          len(frame),
		"cpu_window":                map[string]interface{}{"wall_s": windowS, "loadgen_cores": (selfWindowEnd - selfWindowStart) / windowS},
		"cpu_total_client_s":        selfWindowEnd - selfStart,
		"loadgen_sends_late_5ms":    sendsLate.Load(),
	}
	if o.serverPID != 0 {
		summary["server"] = map[string]interface{}{"pid": o.serverPID, "window_s": windowS,
			"cpu_s": atEnd.cpuS - atStart.cpuS, "rss_kib_idle": idle.rssKiB, "rss_kib_window_end": atEnd.rssKiB,
			"threads": threads}
	}

	// Teardown: DELETE every session on the server, close every PeerConnection (bounded).
	var teardown sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, s := range sessions {
		teardown.Add(1)
		sem <- struct{}{}
		go func(s *session) {
			defer func() { <-sem; teardown.Done() }()
			if s.location != "" {
				if req, err := http.NewRequest(http.MethodDelete, o.url+s.location, nil); err == nil {
					if resp, err := c.http.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			}
			if s.pc != nil {
				s.pc.Close()
			}
		}(s)
	}
	waitTimeout(&teardown, 20*time.Second)
	waitTimeout(&c.senders, 2*time.Second)

	out, _ := json.MarshalIndent(summary, "", "  ")
	if o.jsonOut != "" {
		if err := os.WriteFile(o.jsonOut, append(out, '\n'), 0o644); err != nil {
			log.Printf("rtce_pion_client: %v", err)
		}
	}
	fmt.Printf("| pion client %s | sessions %d/%d connected | frames %d/%.0f (%.2f %%) | interval p50 %v p99 %v ms |\n",
		o.label, connected, o.sessions, frames, expected, 100*ratio,
		summary["frame_interval_ms"].(map[string]interface{})["p50"], summary["frame_interval_ms"].(map[string]interface{})["p99"])
	if o.expectAllConnects && (failed > 0 || withoutEcho > 0) {
		fmt.Fprintf(os.Stderr, "rtce_pion_client: %d sessions failed (%v), %d without an echo\n", failed, failures, withoutEcho)
		os.Exit(1)
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
