package kernlog

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestSharedRead: readers sharing one read get what their own read would
// have given, from their own Since; a later reader is served the shared
// read while it holds the reader's whole window (and is fresh), and reads
// again otherwise.
func TestSharedRead(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "kmsg", "local", "local-6.18.kmsg"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	boot := func() (time.Time, error) { return time.Unix(1_700_000_000, 0), nil }
	own := func(since time.Duration) *Log {
		r := Reader{Path: path, NoFallback: true, Since: since, BootTime: boot}
		l, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	now := time.Unix(1_800_000_000, 0)
	sh := NewShared(10 * time.Second)
	sh.now = func() time.Time { return now }
	shared := func(since time.Duration, notBefore time.Time) *Log {
		r := Reader{Path: path, NoFallback: true, Since: since, BootTime: boot, Shared: sh, NotBefore: notBefore}
		l, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	first := shared(669643000*time.Microsecond, now)
	if len(first.Entries) == 0 {
		t.Fatal("no entries read")
	}
	for _, since := range []time.Duration{669643000 * time.Microsecond, 669644000 * time.Microsecond, 669700000 * time.Microsecond} {
		got, want := shared(since, now.Add(-time.Second)), own(since)
		if !reflect.DeepEqual(got.Entries, want.Entries) || got.Dropped != want.Dropped {
			t.Errorf("since %v: shared %d entries (dropped %d), own read %d (dropped %d)", since, len(got.Entries), got.Dropped, len(want.Entries), want.Dropped)
		}
	}
	// A line written after the shared read: a reader whose window ended
	// before the read is served the read; one whose window ended after it,
	// or who comes after the TTL, reads again and sees the line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("6,600,669800000,-;Memory cgroup out of memory: Killed process 4242 (python3) total-vm:75672kB, anon-rss:65536kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:180kB oom_score_adj:0\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := len(first.Entries)
	now = now.Add(2 * time.Second)
	if l := shared(669643000*time.Microsecond, now.Add(-3*time.Second)); len(l.Entries) != n {
		t.Errorf("served the shared read: %d entries, want %d", len(l.Entries), n)
	}
	if l := shared(669643000*time.Microsecond, now.Add(-time.Second)); len(l.Entries) != n+1 {
		t.Errorf("a window that ended after the shared read: %d entries, want %d (the new line)", len(l.Entries), n+1)
	}
	if l := shared(0, time.Time{}); len(l.Entries) != len(own(0).Entries) {
		t.Errorf("an older Since reads again: %d entries, want %d", len(l.Entries), len(own(0).Entries))
	}
}
