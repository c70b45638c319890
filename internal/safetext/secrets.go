package safetext

import (
	"regexp"
	"strings"
	"unicode"
)

// Secrets on a command line: a job started with `--password=hunter2`,
// `postgres://admin:pw@db/x` or `--token hf_...` shows them to anyone
// who reads /proc/PID/cmdline, and gpufeed would copy them into every
// report, recording and agent endpoint. ScrubArgs is applied where a
// command line enters gpufeed (procfs.ReadCmdline, a recording read back,
// py-spy's process lines), as the environment is filtered by an allowlist
// where it is read: what leaves gpufeed holds the scrubbed form only. It
// keeps every argument and every flag's name, so the command stays
// recognisable, and replaces:
//
//   - the value of a flag whose name says it holds a secret (words such as
//     password, passwd, secret, token, key, apikey, credential, auth,
//     private): --password=X, -password=X, --password X, and NAME=X
//     arguments (an env(1) assignment, a Hydra override db.password=X);
//   - the password of a URL's user information (scheme://user:X@host) and
//     the value of a query parameter whose name says so (?token=X,
//     X-Amz-Signature=X);
//   - strings shaped as well-known tokens wherever they appear: Hugging
//     Face (hf_), GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_),
//     OpenAI-style (sk-), AWS access key ids (AKIA, ASIA), Slack (xoxb-,
//     xoxp-...), JSON Web Tokens (eyJ....eyJ....).
//
// Short flags (-p X) are left alone: their meaning depends on the
// program. A value scrubbed is Redacted.

// Redacted replaces a secret.
const Redacted = "***"

// secretWords are the words of a flag or variable name that say its value
// is a secret (the name is split at -, _, ., and lower-to-upper case).
var secretWords = map[string]bool{
	"password": true, "passwd": true, "passphrase": true, "pwd": true,
	"secret": true, "secrets": true,
	"token": true, "tokens": true,
	"key": true, "apikey": true, "keys": true,
	"credential": true, "credentials": true, "creds": true,
	"auth": true, "authorization": true,
	"private":   true,
	"signature": true, "sig": true,
}

// notSecret are compound names (or the end of one: trainer.max_tokens)
// whose words match but whose value is not a secret, keeping the commonest
// harmless flags readable.
var notSecret = map[string]bool{
	"sort-key": true, "key-file": true, "keyfile": true, "public-key": true,
	"auth-type": true, "token-limit": true, "max-tokens": true, "num-tokens": true,
	"tokenizer": true, "pad-token": true, "eos-token": true, "bos-token": true,
}

// SecretName reports whether a flag or variable name says its value is a
// secret.
func SecretName(name string) bool {
	name = strings.TrimLeft(name, "-+")
	if name == "" {
		return false
	}
	norm := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name))
	for k := range notSecret {
		if norm == k || strings.HasSuffix(norm, "-"+k) {
			return false
		}
	}
	for _, w := range nameWords(name) {
		if secretWords[w] {
			return true
		}
	}
	return false
}

// nameWords splits a name at -, _, . and where a lower-case letter or a
// digit is followed by an upper-case one, lower-cased.
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range name {
		switch {
		case r == '-' || r == '_' || r == '.' || r == '/' || r == ':':
			flush()
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

var (
	// urlUserinfo matches scheme://user:password@ (the password part is
	// group 2).
	urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*):([^/?#\s]*)@`)
	// queryParam matches ?name=value and &name=value in a URL.
	queryParam = regexp.MustCompile(`([?&;])([A-Za-z0-9_.-]+)=([^&#;\s]*)`)
	// tokenShapes match well-known token formats, each whole; the
	// prefix (one of the groups) is kept.
	tokenShapes = regexp.MustCompile(`\b(?:` +
		`(hf_)[A-Za-z0-9]{30,}` + // Hugging Face
		`|(gh[pousr]_)[A-Za-z0-9]{30,}` + // GitHub (36 after the prefix)
		`|(github_pat_)[A-Za-z0-9_]{22,}` + // GitHub fine-grained
		`|(sk-)[A-Za-z0-9_-]{20,}` + // OpenAI, Anthropic (sk-proj-, sk-ant-)
		`|(AKIA|ASIA)[0-9A-Z]{16}\b` + // AWS access key id
		`|(xox[abposr]-)[A-Za-z0-9-]{10,}` + // Slack
		`|(eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*` + // a JSON Web Token: header.payload.signature
		`)`)
)

// ScrubArgs returns args with the secrets they hold replaced (see above).
// args itself is not changed; when nothing is scrubbed it is returned as
// is.
func ScrubArgs(args []string) []string {
	var out []string
	set := func(i int, s string) {
		if s == args[i] && out == nil {
			return
		}
		if out == nil {
			out = append([]string(nil), args...)
		}
		out[i] = s
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if name, _, ok := strings.Cut(a, "="); ok && name != "" && !strings.Contains(name, "://") && !strings.ContainsAny(name, " /\\") && SecretName(name) {
			set(i, name+"="+Redacted)
			continue
		}
		if strings.HasPrefix(a, "--") && len(a) > 2 && !strings.Contains(a, "=") && SecretName(a) && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			set(i, a)
			set(i+1, Redacted)
			i++
			continue
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 3 && !strings.Contains(a, "=") && SecretName(a) && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			// Single-dash long flags (-password X, Go's flag package).
			set(i, a)
			set(i+1, Redacted)
			i++
			continue
		}
		set(i, ScrubText(a))
	}
	if out == nil {
		return args
	}
	return out
}

// ScrubText replaces the secrets a piece of text holds wherever they are:
// URL passwords and secret query parameters, well-known token shapes.
func ScrubText(s string) string {
	if strings.Contains(s, "://") {
		s = urlUserinfo.ReplaceAllString(s, "${1}:"+Redacted+"@")
	}
	if strings.ContainsAny(s, "?&") {
		s = queryParam.ReplaceAllStringFunc(s, func(m string) string {
			sub := queryParam.FindStringSubmatch(m)
			if !SecretName(sub[2]) {
				return m
			}
			return sub[1] + sub[2] + "=" + Redacted
		})
	}
	return tokenShapes.ReplaceAllString(s, "${1}${2}${3}${4}${5}${6}${7}"+Redacted)
}

// ScrubCommandLine scrubs a command line given as one string, its
// arguments separated by spaces (py-spy's process lines).
func ScrubCommandLine(s string) string {
	return strings.Join(ScrubArgs(strings.Split(s, " ")), " ")
}
