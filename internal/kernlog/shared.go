package kernlog

import (
	"context"
	"sync"
	"time"
)

// Shared lets the readers of one kernel log share one read for a short
// while: the node agent finishes its jobs' windows one after another, and
// each read the whole log since its job started. A read serves every later
// reader whose Since is not older than its own, until TTL has passed; a
// reader asking for older records, or whose NotBefore is after the read,
// reads again. Each gets the shared entries from its own Since on.
type Shared struct {
	TTL time.Duration
	mu  sync.Mutex
	at  time.Time
	// since is the Since the kept read was made with.
	since time.Duration
	log   *Log
	err   error
	now   func() time.Time
}

// NewShared shares reads for ttl.
func NewShared(ttl time.Duration) *Shared { return &Shared{TTL: ttl, now: time.Now} }

// read returns r's read, from the shared one when it serves.
func (s *Shared) read(ctx context.Context, r *Reader) (*Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.at.IsZero() || now.Sub(s.at) > s.TTL || r.Since < s.since || s.at.Before(r.NotBefore) {
		own := *r
		own.Shared = nil
		s.log, s.err = own.Read(ctx)
		s.at, s.since = now, r.Since
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.log.from(r.Since), nil
}

// from is the log's entries from since on (entries without a time are
// kept, as a read from since keeps them). Records the read left out to
// respect its cap are said dropped only when they may be newer than since.
func (l *Log) from(since time.Duration) *Log {
	out := *l
	out.Entries = make([]Entry, 0, len(l.Entries))
	for _, e := range l.Entries {
		if since > 0 && e.HasMono && e.Mono < since {
			continue
		}
		out.Entries = append(out.Entries, e)
	}
	if l.Dropped > 0 && len(l.Entries) > 0 && l.Entries[0].HasMono && l.Entries[0].Mono <= since {
		out.Dropped = 0 // everything left out was older than since
	}
	return &out
}
