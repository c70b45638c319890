// Command tracegen writes a synthetic Kineto trace with known GPU idle
// causes (internal/tracegen), for tests and benchmarks:
//
//	tracegen -pattern mixed -steps 20 -o trace.json
//	tracegen -size 1GB -o big.json      # as many steps as fit in 1 GB
//
// It prints the ground truth (idle time per cause) on stderr.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/tracegen"
)

func main() {
	var (
		out     = flag.String("o", "-", "output file (- for stdout)")
		pattern = flag.String("pattern", "mixed", "the steps' pattern: healthy, dataloader, sync, pageable, launch or mixed")
		steps   = flag.Int("steps", 0, "number of ProfilerSteps (default 8, or as many as -size allows)")
		size    = flag.String("size", "", "stop at about this size: 500MB, 1GB (with -steps: make the steps that large)")
		repeat  = flag.Int("repeat", 0, "repeat each step's work this many times (default 1, or sized by -size with -steps)")
		ns      = flag.Bool("ns", false, "nanosecond-resolution timestamps (three decimals of us)")
		seed    = flag.Uint64("seed", 1, "random seed")
		rank    = flag.Int("rank", -1, "rank to write in distributedInfo (-1: none)")
	)
	flag.StringVar(pattern, "scenario", "mixed", "the former name of -pattern")
	flag.Parse()
	cfg := tracegen.Config{Pattern: tracegen.Pattern(*pattern), Steps: *steps, Repeat: *repeat, NsResolution: *ns, Seed: *seed, Rank: *rank, WorldSize: 1}
	if *size != "" {
		n, err := parseSize(*size)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracegen:", err)
			os.Exit(2)
		}
		cfg.TargetBytes = n
	}
	w := os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracegen:", err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	truth, err := tracegen.Generate(w, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracegen:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "tracegen: %d steps, %d events, %d bytes; GPU span %.3f ms, idle %.3f ms\n",
		truth.Steps, truth.Events, truth.Bytes, float64(truth.SpanNs)/1e6, float64(truth.IdleNs())/1e6)
	var causes []string
	for c := range truth.IdleByCause {
		causes = append(causes, string(c))
	}
	sort.Strings(causes)
	for _, c := range causes {
		fmt.Fprintf(os.Stderr, "tracegen:   %-15s %12.3f ms\n", c, float64(truth.IdleByCause[tracegen.Cause(c)])/1e6)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(s)
	for _, x := range []struct {
		suf string
		m   int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(u, x.suf) {
			mult, u = x.m, strings.TrimSuffix(u, x.suf)
			break
		}
	}
	n, err := strconv.ParseFloat(u, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a number with KB, MB or GB", s)
	}
	return int64(n * float64(mult)), nil
}
