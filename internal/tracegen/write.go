package tracegen

import "strconv"

// The writer produces Kineto's layout: a header with deviceProperties and
// distributedInfo, then "traceEvents" with one event per few lines.

func (g *gen) header() {
	g.bw.WriteString("{\n  \"schemaVersion\": 1,\n")
	if g.cfg.Rank >= 0 && g.cfg.WorldSize > 0 {
		g.bw.WriteString(`  "distributedInfo": {"backend": "nccl", "rank": ` + strconv.Itoa(g.cfg.Rank) + `, "world_size": ` + strconv.Itoa(g.cfg.WorldSize) + "},\n")
	}
	g.bw.WriteString(`  "deviceProperties": [
    {
      "id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 84990623744,
      "computeMajor": 8, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936,
      "numSms": 108, "sharedMemPerBlockOptin": 166912
    }
  ],
  "traceEvents": [
`)
	g.meta("thread_name", pid, tid, "thread 4242 (python)")
}

func (g *gen) footer() {
	g.bw.WriteString("\n  ],\n  \"traceName\": \"tracegen\",\n")
	if g.cfg.NsResolution {
		g.bw.WriteString("  \"displayTimeUnit\": \"ns\"\n}\n")
	} else {
		g.bw.WriteString("  \"displayTimeUnit\": \"ms\"\n}\n")
	}
}

// begin starts a new event, writing the separator.
func (g *gen) begin() {
	if g.sep {
		g.bw.WriteString(",\n")
	}
	g.sep = true
	g.events++
}

// appendTime writes ns as microseconds.
func (g *gen) appendTime(b []byte, ns int64) []byte {
	b = strconv.AppendInt(b, ns/1000, 10)
	if g.cfg.NsResolution {
		r := ns % 1000
		b = append(b, '.', byte('0'+r/100), byte('0'+r/10%10), byte('0'+r%10))
	}
	return b
}

func (g *gen) complete(cat, name string, p, t int64, start, end int64, args func(b []byte) []byte) {
	g.begin()
	b := g.buf[:0]
	b = append(b, "  {\n    \"ph\": \"X\", \"cat\": \""...)
	b = append(b, cat...)
	b = append(b, "\", \"name\": "...)
	b = strconv.AppendQuote(b, name)
	b = append(b, ", \"pid\": "...)
	b = strconv.AppendInt(b, p, 10)
	b = append(b, ", \"tid\": "...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, ",\n    \"ts\": "...)
	b = g.appendTime(b, start)
	b = append(b, ", \"dur\": "...)
	b = g.appendTime(b, end-start)
	if args != nil {
		b = append(b, ",\n    \"args\": {\n      "...)
		b = args(b)
		b = append(b, "\n    }"...)
	}
	b = append(b, "\n  }"...)
	g.bw.Write(b)
	g.buf = b
}

func (g *gen) flow(ph byte, id, p, t, ts int64) {
	g.begin()
	b := g.buf[:0]
	b = append(b, "  {\n    \"ph\": \""...)
	b = append(b, ph)
	b = append(b, "\", \"id\": "...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, ", \"pid\": "...)
	b = strconv.AppendInt(b, p, 10)
	b = append(b, ", \"tid\": "...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, ", \"ts\": "...)
	b = g.appendTime(b, ts)
	b = append(b, ",\n    \"cat\": \"ac2g\", \"name\": \"ac2g\""...)
	if ph == 'f' {
		b = append(b, ", \"bp\": \"e\""...)
	}
	b = append(b, "\n  }"...)
	g.bw.Write(b)
	g.buf = b
}

func (g *gen) meta(name string, p, t int64, value string) {
	g.begin()
	b := g.buf[:0]
	b = append(b, "  {\n    \"name\": \""...)
	b = append(b, name...)
	b = append(b, "\", \"ph\": \"M\", \"ts\": "...)
	b = g.appendTime(b, g.host)
	b = append(b, ", \"pid\": "...)
	b = strconv.AppendInt(b, p, 10)
	b = append(b, ", \"tid\": "...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, ",\n    \"args\": {\n      \"name\": "...)
	b = strconv.AppendQuote(b, value)
	b = append(b, "\n    }\n  }"...)
	g.bw.Write(b)
	g.buf = b
}

func (g *gen) annotation(name string, start, end int64) {
	g.complete("user_annotation", name, pid, tid, start, end, func(b []byte) []byte {
		b = append(b, "\"External id\": "...)
		b = strconv.AppendInt(b, g.ext, 10)
		g.ext++
		return b
	})
}

func (g *gen) annotationStep(i int, start, end int64) {
	g.annotation("ProfilerStep#"+strconv.Itoa(i), start, end)
}

func (g *gen) cpuOp(name string, start, end int64) {
	ext := g.ext
	g.ext++
	g.cpuOpExt(name, start, end, ext)
}

func (g *gen) cpuOpExt(name string, start, end, ext int64) {
	g.complete("cpu_op", name, pid, tid, start, end, func(b []byte) []byte {
		b = append(b, "\"External id\": "...)
		b = strconv.AppendInt(b, ext, 10)
		b = append(b, ",\"Sequence number\": "...)
		b = strconv.AppendInt(b, ext*3, 10)
		b = append(b, ", \"Fwd thread id\": 0, \"Ev Idx\": "...)
		b = strconv.AppendInt(b, ext, 10)
		return b
	})
}

func (g *gen) runtime(name string, start, end, corr, ext int64) {
	g.complete("cuda_runtime", name, pid, tid, start, end, func(b []byte) []byte {
		b = append(b, "\"External id\": "...)
		b = strconv.AppendInt(b, ext, 10)
		b = append(b, ",      \"cbid\": 211, \"correlation\": "...)
		b = strconv.AppendInt(b, corr, 10)
		return b
	})
	g.flow('s', corr, pid, tid, start)
}

func (g *gen) gpuArgs(b []byte, corr, ext int64) []byte {
	b = append(b, "\"External id\": "...)
	b = strconv.AppendInt(b, ext, 10)
	b = append(b, ",      \"device\": 0, \"context\": 1,      \"stream\": 7, \"correlation\": "...)
	b = strconv.AppendInt(b, corr, 10)
	return b
}

func (g *gen) kernel(name string, start, end, corr, ext int64, blocksPerSM float64) {
	g.complete("kernel", name, gpuPid, streamID, start, end, func(b []byte) []byte {
		b = append(b, "\"External id\": "...)
		b = strconv.AppendInt(b, ext, 10)
		b = append(b, ",      \"queued\": 0, \"device\": 0, \"context\": 1,      \"stream\": 7, \"correlation\": "...)
		b = strconv.AppendInt(b, corr, 10)
		b = append(b, ",      \"registers per thread\": 32,      \"shared memory\": 0,      \"blocks per SM\": "...)
		b = strconv.AppendFloat(b, blocksPerSM, 'f', 6, 64)
		b = append(b, ",      \"warps per SM\": "...)
		b = strconv.AppendFloat(b, blocksPerSM*4, 'f', 6, 64)
		b = append(b, ",      \"grid\": [108, 1, 1],      \"block\": [128, 1, 1],      \"est. achieved occupancy %\": 50"...)
		return b
	})
	g.flow('f', corr, gpuPid, streamID, start)
}

func (g *gen) memcpy(name string, start, end, corr, ext, bytes int64) {
	g.complete("gpu_memcpy", name, gpuPid, streamID, start, end, func(b []byte) []byte {
		b = g.gpuArgs(b, corr, ext)
		b = append(b, ",      \"bytes\": "...)
		b = strconv.AppendInt(b, bytes, 10)
		b = append(b, ", \"memory bandwidth (GB/s)\": 20.5"...)
		return b
	})
	g.flow('f', corr, gpuPid, streamID, start)
}
