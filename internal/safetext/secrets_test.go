package safetext

import (
	"slices"
	"strings"
	"testing"
)

func TestScrubArgs(t *testing.T) {
	hf := "hf_" + strings.Repeat("aB3", 12)
	ghp := "ghp_" + strings.Repeat("x9Z", 12)
	pat := "github_pat_11ABCDEFG0" + strings.Repeat("a_b", 20)
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	for _, tc := range []struct{ in, want []string }{
		{[]string{"python", "train.py", "--password=hunter2", "--lr", "0.1"}, []string{"python", "train.py", "--password=***", "--lr", "0.1"}},
		{[]string{"app", "--password", "hunter2", "--epochs", "3"}, []string{"app", "--password", "***", "--epochs", "3"}},
		{[]string{"app", "--db-passwd", "x", "--api_key=abc", "--apiKey", "abc", "--client-secret=s", "--hf_token", "t", "--aws-credentials=c", "--basic-auth", "u:p"},
			[]string{"app", "--db-passwd", "***", "--api_key=***", "--apiKey", "***", "--client-secret=***", "--hf_token", "***", "--aws-credentials=***", "--basic-auth", "***"}},
		{[]string{"app", "-password", "x", "-token=y"}, []string{"app", "-password", "***", "-token=***"}},
		{[]string{"env", "DB_PASSWORD=s3cr3t", "WANDB_API_KEY=k", "python", "x.py", "db.password=p", "+trainer.secret_key=q"},
			[]string{"env", "DB_PASSWORD=***", "WANDB_API_KEY=***", "python", "x.py", "db.password=***", "+trainer.secret_key=***"}},
		{[]string{"app", "--db", "postgres://admin:s3cr3tpw@db.local:5432/x", "--url=https://u:p@h/p?x=1"},
			[]string{"app", "--db", "postgres://admin:***@db.local:5432/x", "--url=https://u:***@h/p?x=1"}},
		{[]string{"curl", "https://bucket.s3.amazonaws.com/o?X-Amz-Signature=abcdef&X-Amz-Date=1&token=zz"},
			[]string{"curl", "https://bucket.s3.amazonaws.com/o?X-Amz-Signature=***&X-Amz-Date=1&token=***"}},
		{[]string{"app", "--hub", hf, ghp, pat, "sk-proj-" + strings.Repeat("Q1w", 10), "AKIAIOSFODNN7EXAMPLE", "xoxb-1234-5678-abcdefghij", "Bearer " + jwt},
			[]string{"app", "--hub", "hf_***", "ghp_***", "github_pat_***", "sk-***", "AKIA***", "xoxb-***", "Bearer eyJ***"}},
		{[]string{"app", "--token", "--verbose"}, []string{"app", "--token", "--verbose"}}, // a switch: no value to hide
		// Harmless look-alikes keep their values.
		{[]string{"python", "-m", "torch.distributed.run", "--nproc_per_node=8", "--max-tokens", "4096", "--sort-key=len", "--keep", "3", "--monkey=1", "task-abcdefghijklmnopqrstuvwxyz", "-p", "9"},
			[]string{"python", "-m", "torch.distributed.run", "--nproc_per_node=8", "--max-tokens", "4096", "--sort-key=len", "--keep", "3", "--monkey=1", "task-abcdefghijklmnopqrstuvwxyz", "-p", "9"}},
		{[]string{"python", "-c", "import os; token = os.environ['T']"}, []string{"python", "-c", "import os; token = os.environ['T']"}},
	} {
		orig := slices.Clone(tc.in)
		got := ScrubArgs(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("ScrubArgs(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		if !slices.Equal(tc.in, orig) {
			t.Errorf("ScrubArgs changed its argument: %q", tc.in)
		}
	}
	if got := ScrubCommandLine("python x.py --token " + hf); got != "python x.py --token ***" {
		t.Errorf("ScrubCommandLine: %q", got)
	}
}

// FuzzScrubArgs: scrubbing never panics, keeps the number of arguments,
// is idempotent, and leaves no secret value it was given behind a secret
// flag.
func FuzzScrubArgs(f *testing.F) {
	f.Add("--password=hunter2", "x", "postgres://a:b@h")
	f.Add("--token", "hf_abcdefghijklmnopqrstuvwxyz0123456789", "y")
	f.Add("DB_PASSWORD=s", "eyJaaaaaaaaa.bbbbbbbbbb.cc", "https://h/?sig=1&a=2")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		args := []string{a, b, c}
		got := ScrubArgs(args)
		if len(got) != len(args) {
			t.Fatalf("%q -> %q", args, got)
		}
		if again := ScrubArgs(got); !slices.Equal(again, got) {
			t.Fatalf("not idempotent: %q -> %q -> %q", args, got, again)
		}
		for i, s := range args {
			if name, v, ok := strings.Cut(s, "="); ok && strings.HasPrefix(name, "--") && !strings.ContainsAny(name, " /\\") && !strings.Contains(name, "://") && SecretName(name) && v != Redacted && got[i] != name+"="+Redacted {
				t.Fatalf("%q kept as %q", s, got[i])
			}
		}
	})
}
