package safetext

import "strconv"

// Bytes writes a byte count in binary units: whole bytes ("512 B"), then
// KiB and MiB with prec decimals and GiB and TiB with precLarge ("11.6
// KiB", "19.39 GiB" with 1, 2). A value that rounds to 0 B prints as 0 B,
// never "-0 B"; a negative one (a change) keeps its sign. It is the one
// byte formatter: a report's tables and evidence write 1, 2, the claims
// of the platform checks 0, 1 (whole MiB), the rest 1, 1.
func Bytes(v float64, prec, precLarge int) string {
	const unit = 1024.0
	if v > -0.5 && v < 0.5 {
		v = 0
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	switch {
	case v < unit:
		return sign + strconv.FormatFloat(v, 'f', 0, 64) + " B"
	case v < unit*unit:
		return sign + strconv.FormatFloat(v/unit, 'f', prec, 64) + " KiB"
	case v < unit*unit*unit:
		return sign + strconv.FormatFloat(v/(unit*unit), 'f', prec, 64) + " MiB"
	case v < unit*unit*unit*unit:
		return sign + strconv.FormatFloat(v/(unit*unit*unit), 'f', precLarge, 64) + " GiB"
	}
	return sign + strconv.FormatFloat(v/(unit*unit*unit*unit), 'f', precLarge, 64) + " TiB"
}
