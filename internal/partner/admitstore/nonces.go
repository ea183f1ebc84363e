package admitstore

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/internal/partner"
)

// The memory store's replay memory: bounded, and saved across a graceful
// restart.

// NonceBytes is the most heap one remembered nonce takes in the memory
// store: measured (NonceFootprint; make bench prints it) at 24 to 38 bytes
// for 200 000 to 5 000 000 nonces, depending on where the app's map is
// between two doublings, rounded up.
const NonceBytes = 40

// DefaultNonceMemoryMax is the memory store's default bound on remembered
// nonces: 128 MiB of them (3 355 443; a sustained 11 000 signed requests a
// second for five minutes).
const DefaultNonceMemoryMax = 128 << 20 / NonceBytes

var (
	nonceFullTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gatehouse_nonce_memory_full_total",
		Help: "Signed requests refused (503) because the in-process replay memory held GATEHOUSE_NONCE_MEMORY_MAX nonces.",
	})
	nonceEntriesGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gatehouse_nonce_memory_entries",
		Help: "Nonces held by the in-process replay memory at its last sweep (expired ones included until then).",
	})
)

func init() { prometheus.MustRegister(nonceFullTotal, nonceEntriesGauge) }

// fullWarnEvery rate-limits the WARN of a full replay memory.
const fullWarnEvery = 10 * time.Second

// reclaimEvery rate-limits the sweeps a full replay memory runs itself.
const reclaimEvery = time.Second

// takePlace counts one more nonce, unless the memory is full.
func (s *memoryStore) takePlace() bool {
	for {
		n := s.nonceCount.Load()
		if n >= s.nonceMax {
			return false
		}
		if s.nonceCount.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// reclaim sweeps expired entries now, unless a sweep ran within
// reclaimEvery or is running.
func (s *memoryStore) reclaim() {
	if s.tick()-s.lastSweep.Load() < int64(reclaimEvery) || !s.reclaimMu.TryLock() {
		return
	}
	defer s.reclaimMu.Unlock()
	s.sweep()
}

func (s *memoryStore) refuseFull() {
	nonceFullTotal.Inc()
	now := s.tick()
	last := s.lastWarn.Load()
	if last != 0 && now-last < int64(fullWarnEvery) || !s.lastWarn.CompareAndSwap(last, max(now, 1)) {
		return
	}
	s.log.Warn("the replay memory is full: new signed requests are refused with 503 until remembered nonces expire (up to 5 minutes); raise GATEHOUSE_NONCE_MEMORY_MAX or use Redis",
		"nonces", s.nonceCount.Load(), "max", s.nonceMax)
}

func (s *memoryStore) setStart(t time.Time) {
	s.startMs.Store(t.UnixMilli())
	replayStartGauge.Set(float64(t.UnixMilli()) / 1000)
}

func (s *memoryStore) replayStart() time.Time { return time.UnixMilli(s.startMs.Load()) }

// ReplayStart is [Store.ReplayStart]: the process's start, or the start
// carried over by a saved replay memory; none on a first start.
func (s *memoryStore) ReplayStart() time.Time { return shownStart(s.replayStart()) }

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return binary.LittleEndian.Uint64(b[:])
}

// NonceFootprint measures the heap bytes per remembered nonce of the memory
// store with n nonces of one app (for tests and make bench).
func NonceFootprint(n int) float64 {
	s := newMemory(options{now: time.Now, nonceMax: n + 1})
	defer s.Close()
	nonces := make([]string, n)
	for i := range nonces {
		nonces[i] = "nonce-" + strconv.Itoa(i) + "-0123456789abcdef"
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, nonce := range nonces {
		// Limit 1: the window holds one entry, every nonce is recorded.
		if _, _, err := s.admit(partner.AdmitRequest{App: "app", Nonce: nonce, NonceTTL: 5 * time.Minute, Verified: true, Limit: 1, Window: time.Second}); err != nil {
			panic(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(nonces)
	runtime.KeepAlive(s)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// The replay file: what a graceful stop saves and the next start loads.
//
//	magic, seed (8 bytes), start (ms, 8), then per app: the app's length
//	(uvarint, 0 ends the list), the app, its nonce count (uvarint), and per
//	nonce its key (8) and expiry (Unix ms, 8); then a CRC-32 of all before.
//
// It holds the nonce hashes and their seed, never a nonce itself; the file
// is 0600 like the data dir's keys.
const replayMagic = "GHREPLAY1\n"

func (s *memoryStore) saveReplayFile() error {
	if err := os.MkdirAll(filepath.Dir(s.replayFile), 0o700); err != nil {
		return fmt.Errorf("admitstore: save replay memory: %w", err)
	}
	tmp := s.replayFile + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("admitstore: save replay memory: %w", err)
	}
	defer os.Remove(tmp) // after a successful rename, nothing is there
	crc := crc32.NewIEEE()
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<16)
	var buf [binary.MaxVarintLen64]byte
	u64 := func(v uint64) { binary.LittleEndian.PutUint64(buf[:8], v); _, _ = w.Write(buf[:8]) }
	uvar := func(v uint64) { _, _ = w.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	_, _ = w.WriteString(replayMagic)
	u64(s.nonceSeed)
	u64(uint64(s.startMs.Load()))
	now := s.tick()
	saved := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for app, st := range sh.apps {
			live := 0
			for _, exp := range st.nonces {
				if exp > now {
					live++
				}
			}
			if live == 0 {
				continue
			}
			uvar(uint64(len(app)))
			_, _ = w.WriteString(app)
			uvar(uint64(live))
			for k, exp := range st.nonces {
				if exp > now {
					u64(uint64(k))
					u64(uint64(s.epoch.Add(time.Duration(exp)).UnixMilli()))
				}
			}
			saved += live
		}
		sh.mu.Unlock()
	}
	uvar(0)
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("admitstore: save replay memory: %w", err)
	}
	binary.LittleEndian.PutUint32(buf[:4], crc.Sum32())
	if _, err := f.Write(buf[:4]); err != nil {
		f.Close()
		return fmt.Errorf("admitstore: save replay memory: %w", err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("admitstore: save replay memory: %w", err)
	}
	if err := os.Rename(tmp, s.replayFile); err != nil {
		return fmt.Errorf("admitstore: save replay memory: %w", err)
	}
	// Saved: the next start is not an unclean one.
	_ = os.Remove(s.runningMark())
	syncDir(filepath.Dir(s.replayFile))
	s.log.Info("replay memory saved", "nonces", saved, "file", s.replayFile)
	return nil
}

// loadReplayFile restores a saved replay memory and removes the file, so
// that a later start that did not follow a save (kill -9) cannot use it. A
// file that cannot be read leaves the memory empty, started now. Without a
// file, the running mark tells an unclean stop (the mark of the previous
// process is still there: the memory starts now) from a first start in
// this data dir (nothing can have been used: it is complete from the
// beginning). The mark is then set for this process; Close removes it.
func (s *memoryStore) loadReplayFile() {
	defer s.markRunning()
	data, err := os.ReadFile(s.replayFile)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(s.runningMark()); errors.Is(err, os.ErrNotExist) {
			s.startMs.Store(0)
			replayStartGauge.Set(0)
			s.log.Info("first start of the replay memory in this data dir: nothing to remember yet")
			return
		}
		s.log.Warn("the previous process stopped without saving its replay memory (killed or crashed): it starts now; signed requests stamped earlier are refused",
			"start", s.replayStart().UTC().Format(time.RFC3339Nano))
		return
	}
	defer func() {
		if err := os.Remove(s.replayFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("could not remove the loaded replay memory file; remove it before the next start", "file", s.replayFile, "err", err)
		}
		syncDir(filepath.Dir(s.replayFile))
	}()
	if err != nil {
		s.log.Error("could not read the saved replay memory: it starts now", "file", s.replayFile, "err", err)
		return
	}
	n, err := s.decodeReplay(data)
	if err != nil {
		s.log.Error("the saved replay memory cannot be used: it starts now", "file", s.replayFile, "err", err)
		return
	}
	s.log.Info("replay memory loaded", "nonces", n, "start", s.replayStart().UTC().Format(time.RFC3339Nano))
}

// runningMark is the file that exists while a process uses the replay file.
func (s *memoryStore) runningMark() string { return s.replayFile + ".running" }

func (s *memoryStore) markRunning() {
	if err := os.MkdirAll(filepath.Dir(s.replayFile), 0o700); err == nil {
		if f, err := os.OpenFile(s.runningMark(), os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			_ = f.Sync()
			f.Close()
			syncDir(filepath.Dir(s.replayFile))
			return
		}
	}
	// Without the mark, a kill -9 would look like a first start next time.
	s.log.Error("could not mark the replay memory as in use; a crash would not be detected at the next start", "file", s.runningMark())
}

func (s *memoryStore) decodeReplay(data []byte) (int, error) {
	if len(data) < len(replayMagic)+16+1+4 || string(data[:len(replayMagic)]) != replayMagic {
		return 0, errors.New("not a replay memory file")
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return 0, errors.New("checksum mismatch")
	}
	r := body[len(replayMagic):]
	u64 := func() (uint64, bool) {
		if len(r) < 8 {
			return 0, false
		}
		v := binary.LittleEndian.Uint64(r)
		r = r[8:]
		return v, true
	}
	uvar := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	seed, _ := u64()
	start, _ := u64()
	type entry struct {
		key nonceKey
		exp int64
	}
	loaded := map[string][]entry{}
	nowMs := s.now().UnixMilli()
	total := 0
	for {
		l, ok := uvar()
		if !ok || l > uint64(len(r)) {
			return 0, errors.New("truncated")
		}
		if l == 0 {
			break
		}
		app := string(r[:l])
		r = r[l:]
		cnt, ok := uvar()
		if !ok || cnt > uint64(len(r))/16 {
			return 0, errors.New("truncated")
		}
		for range cnt {
			k, _ := u64()
			exp, _ := u64()
			if int64(exp) > nowMs {
				if int64(total) >= s.nonceMax {
					// Loading part of it would forget nonces still
					// live; refusing the whole file starts the memory
					// now, which refuses every request stamped before.
					return 0, fmt.Errorf("it holds more live nonces than GATEHOUSE_NONCE_MEMORY_MAX (%d)", s.nonceMax)
				}
				loaded[app] = append(loaded[app], entry{nonceKey(k), int64(exp)})
				total++
			}
		}
	}
	// Only a whole file is used.
	s.nonceSeed = seed
	s.startMs.Store(int64(start))
	replayStartGauge.Set(float64(start) / 1000)
	for app, es := range loaded {
		sh := s.shard(app)
		st := &appState{nonces: make(map[nonceKey]int64, len(es))}
		for _, e := range es {
			st.nonces[e.key] = int64(time.UnixMilli(e.exp).Sub(s.epoch))
		}
		sh.apps[app] = st
	}
	s.nonceCount.Store(int64(total))
	return total, nil
}

// syncDir makes a rename or removal in dir durable (best effort: some
// file systems do not sync directories).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
