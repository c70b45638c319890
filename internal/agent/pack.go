package agent

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// A window kept in the ring is its recording with the thread samples that
// repeat the thread's previous one left out, and, beside it, where each
// left-out sample goes. Most threads of a GPU job sleep (DataLoader and
// intra-op pools, NCCL and CUDA helpers): their counters do not move from
// one sample to the next, and their sleep details (carried forward by the
// sampler while they do not run) repeat on every slow tick. Left out and
// put back, they cost the ring a few bytes each instead of a line of
// JSON, and the recording /recording serves is the one sampled, sample
// for sample.

// packed is one window in the ring.
type packed struct {
	// rec is the thinned timeline (timeline.Encode).
	rec []byte
	// order is, gzip-compressed as JSON, one list per tick of the tick's
	// thread samples in their order: 0 for the next sample kept in rec,
	// TID for a repeat of the thread's previous fast-tier fields with no
	// slow-tier fields, -TID for a repeat of its previous fast-tier fields
	// with its last slow-tier fields (context switches, where it sleeps).
	order []byte
}

func (p packed) size() int { return len(p.rec) + len(p.order) }

func sameFast(a, b *timeline.ThreadSample) bool {
	return a.PID == b.PID && a.State == b.State && a.UTime == b.UTime && a.STime == b.STime &&
		a.RunNS == b.RunNS && a.WaitNS == b.WaitNS && a.Slices == b.Slices && a.CPU == b.CPU
}

type slowFields struct {
	sw  *timeline.Switches
	blk *timeline.Blocked
}

func (s slowFields) equal(sw *timeline.Switches, blk *timeline.Blocked) bool {
	if (s.sw == nil) != (sw == nil) || (s.blk == nil) != (blk == nil) {
		return false
	}
	return (sw == nil || *s.sw == *sw) && (blk == nil || *s.blk == *blk)
}

// pack thins tl's ticks in place (tl is not read afterwards) and encodes it.
func pack(tl *timeline.Timeline) (packed, error) {
	last := map[int]*timeline.ThreadSample{}
	lastSlow := map[int]slowFields{}
	order := make([][]int32, len(tl.Ticks))
	for i := range tl.Ticks {
		tk := &tl.Ticks[i]
		all := tk.Threads
		kept := make([]timeline.ThreadSample, 0, 8)
		ord := make([]int32, 0, len(all))
		for k := range all {
			s := &all[k]
			prev := last[s.TID]
			slow := s.Switches != nil || s.Blocked != nil
			ls, haveSlow := lastSlow[s.TID]
			switch {
			case prev != nil && sameFast(prev, s) && !slow:
				ord = append(ord, int32(s.TID))
			case prev != nil && sameFast(prev, s) && slow && haveSlow && ls.equal(s.Switches, s.Blocked):
				ord = append(ord, -int32(s.TID))
			default:
				ord = append(ord, 0)
				kept = append(kept, *s)
			}
			last[s.TID] = s
			if slow {
				lastSlow[s.TID] = slowFields{s.Switches, s.Blocked}
			}
		}
		order[i] = ord
		tk.Threads = kept
	}
	var rec, side bytes.Buffer
	if err := timeline.Encode(&rec, tl); err != nil {
		return packed{}, err
	}
	zw, err := gzip.NewWriterLevel(&side, gzip.BestSpeed)
	if err != nil {
		return packed{}, err
	}
	if err := json.NewEncoder(zw).Encode(order); err != nil {
		return packed{}, err
	}
	if err := zw.Close(); err != nil {
		return packed{}, err
	}
	return packed{rec: rec.Bytes(), order: side.Bytes()}, nil
}

// unpack decodes a window and puts its left-out samples back.
func unpack(p packed, name string) (*timeline.Timeline, []string, error) {
	tl, warns, err := timeline.Decode(bytes.NewReader(p.rec), name)
	if err != nil {
		return nil, nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(p.order))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: sample order: %w", name, err)
	}
	var order [][]int32
	if err := json.NewDecoder(zr).Decode(&order); err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("%s: sample order: %w", name, err)
	}
	if len(order) != len(tl.Ticks) {
		return nil, nil, fmt.Errorf("%s: sample order for %d ticks, %d ticks recorded", name, len(order), len(tl.Ticks))
	}
	last := map[int]timeline.ThreadSample{}
	lastSlow := map[int]slowFields{}
	for i := range tl.Ticks {
		tk := &tl.Ticks[i]
		kept := tk.Threads
		out := make([]timeline.ThreadSample, 0, len(order[i]))
		k := 0
		for _, v := range order[i] {
			var s timeline.ThreadSample
			switch {
			case v == 0:
				if k >= len(kept) {
					return nil, nil, fmt.Errorf("%s: tick %d: more samples ordered than recorded", name, i)
				}
				s = kept[k]
				k++
			default:
				tid := int(v)
				if tid < 0 {
					tid = -tid
				}
				prev, ok := last[tid]
				if !ok {
					return nil, nil, fmt.Errorf("%s: tick %d: thread %d repeats a sample never recorded", name, i, tid)
				}
				s = prev
				s.Switches, s.Blocked = nil, nil
				if v < 0 {
					ls := lastSlow[tid]
					s.Switches, s.Blocked = ls.sw, ls.blk
				}
			}
			out = append(out, s)
			last[s.TID] = s
			if s.Switches != nil || s.Blocked != nil {
				lastSlow[s.TID] = slowFields{s.Switches, s.Blocked}
			}
		}
		if k != len(kept) {
			return nil, nil, fmt.Errorf("%s: tick %d: %d samples recorded, %d ordered", name, i, len(kept), k)
		}
		tk.Threads = out
	}
	return tl, warns, nil
}
