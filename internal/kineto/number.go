package kineto

import "math"

// Timestamps in Chrome-trace JSON are microseconds written in decimal, with
// up to three fractional digits in nanosecond-resolution Kineto traces
// ("ts": 1712195495519689.047). A float64 holds only 15-16 significant
// digits, so those values are read here as exact decimals and scaled to
// integer nanoseconds, never through float64.

// decimal is a parsed JSON number: mantissa * 10^exp, with neg for the sign.
type decimal struct {
	mant uint64
	exp  int
	neg  bool
}

// numKind says what a number token was.
type numKind uint8

const (
	numOK numKind = iota
	numNaN
	numInf
	numBad
)

// parseDecimal reads a JSON number token exactly. Digits beyond 19
// significant ones are dropped (their value shifts exp), which is far below a
// nanosecond for any timestamp. NaN and infinities, which Kineto writes
// unquoted when a clock misbehaves, are reported as such.
func parseDecimal(tok []byte) (decimal, numKind) {
	var d decimal
	i := 0
	if i < len(tok) && (tok[i] == '-' || tok[i] == '+') {
		d.neg = tok[i] == '-'
		i++
	}
	if i < len(tok) && (tok[i] < '0' || tok[i] > '9') && tok[i] != '.' {
		return d, literalKind(tok[i:])
	}
	sawDigit := false
	const maxMant = (math.MaxUint64 - 9) / 10
	for ; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
		sawDigit = true
		if d.mant <= maxMant {
			d.mant = d.mant*10 + uint64(tok[i]-'0')
		} else {
			d.exp++
		}
	}
	if i < len(tok) && tok[i] == '.' {
		i++
		for ; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
			sawDigit = true
			if d.mant <= maxMant {
				d.mant = d.mant*10 + uint64(tok[i]-'0')
				d.exp--
			}
		}
	}
	if !sawDigit {
		return d, numBad
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		eneg := false
		if i < len(tok) && (tok[i] == '-' || tok[i] == '+') {
			eneg = tok[i] == '-'
			i++
		}
		if i >= len(tok) {
			return d, numBad
		}
		e := 0
		for ; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
			if e < 10000 {
				e = e*10 + int(tok[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		d.exp += e
	}
	if i != len(tok) {
		return d, numBad
	}
	return d, numOK
}

func literalKind(tok []byte) numKind {
	switch string(tok) {
	case "NaN", "nan", "NAN":
		return numNaN
	case "Infinity", "inf", "Inf", "INF", "infinity":
		return numInf
	}
	return numBad
}

var pow10 = [...]uint64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
	1000000000, 10000000000, 100000000000, 1000000000000, 10000000000000,
	100000000000000, 1000000000000000, 10000000000000000, 100000000000000000,
	1000000000000000000, 10000000000000000000}

// scaled returns d * 10^shift as an int64, rounding half away from zero;
// ok is false when the value does not fit.
func (d decimal) scaled(shift int) (int64, bool) {
	e := d.exp + shift
	m := d.mant
	switch {
	case m == 0:
		return 0, true
	case e >= 0:
		for ; e > 0; e-- {
			if m > math.MaxInt64/10 {
				return 0, false
			}
			m *= 10
		}
	default:
		if -e >= len(pow10) {
			m = 0
			break
		}
		p := pow10[-e]
		q, r := m/p, m%p
		if r >= p-r { // r >= p/2 without overflow
			q++
		}
		m = q
	}
	if m > math.MaxInt64 {
		return 0, false
	}
	if d.neg {
		return -int64(m), true
	}
	return int64(m), true
}

// parseMicrosAsNanos reads a microsecond value and returns integer nanoseconds.
func parseMicrosAsNanos(tok []byte) (int64, numKind) {
	d, k := parseDecimal(tok)
	if k != numOK {
		return 0, k
	}
	v, ok := d.scaled(3)
	if !ok {
		return 0, numInf
	}
	return v, numOK
}

// parseInt reads an integer-valued number ("7", "7.0", "1e3"), rounding a
// fractional part; ok is false for anything else.
func parseInt(tok []byte) (int64, bool) {
	d, k := parseDecimal(tok)
	if k != numOK {
		return 0, false
	}
	return d.scaled(0)
}

// parseFloat reads a number as a float64 (for values that need no
// exactness, such as blocks per SM).
func parseFloat(tok []byte) (float64, bool) {
	d, k := parseDecimal(tok)
	if k != numOK {
		return 0, false
	}
	v := float64(d.mant) * math.Pow10(d.exp)
	if d.neg {
		v = -v
	}
	return v, true
}
