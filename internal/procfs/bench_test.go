package procfs

import "testing"

func BenchmarkParseStat(b *testing.B) {
	buf := []byte(realStat)
	var s Stat
	for b.Loop() {
		if err := ParseStat(buf, &s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSchedstat(b *testing.B) {
	buf := []byte(realSchedstat)
	var s Schedstat
	for b.Loop() {
		if err := ParseSchedstat(buf, &s); err != nil {
			b.Fatal(err)
		}
	}
}
