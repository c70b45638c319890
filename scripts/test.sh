#!/usr/bin/env bash
# The whole test suite: what CI runs (.ci/run) and the README's second command.
# It installs what it needs (staticcheck) and fails on the first red step.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
# go-nvml's cgo stubs call NVML functions its header marks deprecated: one C
# warning each on a fresh build, none of them ours.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
# Builds without the checkout's directory in them (-trimpath): the build
# cache then serves a fresh clone of an unchanged package, where otherwise
# every package of the module is compiled again for each new directory
# (about 20 s of the lanes' start here, and as much again of the
# background links and race builds that run beside the first live tests).
# The tests' own builds of gpufeed (go build) take it from GOFLAGS too.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

step() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }

# gofmt, go vet and staticcheck run beside the checks of what is installed
# and the compile step (about 12 s with warm caches, which held the lanes
# back), and must pass before the lanes start. Run beside the lanes (tried,
# at nice 19) they crowded the first serial tests: a spinning launch thread
# counted 9 runnable tasks outside its job.
lint_log=$(mktemp)
scripts/lint.sh >"$lint_log" 2>&1 &
lint_pid=$!

# The real PyTorch tests (a DataLoader, a torch.distributed job, torchvision's
# transforms) run under Debian's own interpreter with Debian's python3-torch
# and python3-torchvision: install them when missing (quietly, without the
# recommended video and GUI libraries; waiting for a dpkg lock another apt
# holds). Where they cannot be had, those tests skip and say why.
step "python3-torch"
if /usr/bin/python3 -c 'import torch, numpy, torchvision' >/dev/null 2>&1; then
	echo "present"
else
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	apt_install() {
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends \
			python3-torch python3-numpy python3-torchvision >/dev/null 2>&1
	}
	if command -v apt-get >/dev/null && { apt_install || { $sudo apt-get -qq -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 && apt_install; }; } &&
		/usr/bin/python3 -c 'import torch, numpy, torchvision' >/dev/null 2>&1; then
		echo "installed python3-torch, python3-torchvision"
	else
		echo "python3-torch or python3-torchvision could not be installed (apt-get as root or passwordless sudo is needed): the real PyTorch tests will skip"
	fi
fi

# The simulated driver's tests count a launch loop's system calls with
# strace: install it when missing; without it those checks skip and say so.
step "strace"
if command -v strace >/dev/null; then
	echo "present"
else
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	if command -v apt-get >/dev/null && { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends strace >/dev/null 2>&1 ||
		{ $sudo apt-get -qq -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 &&
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends strace >/dev/null 2>&1; }; }; then
		echo "installed strace"
	else
		echo "strace could not be installed (apt-get as root or passwordless sudo is needed): the system-call counts will skip"
	fi
fi

# The agent's test runs a real Prometheus server and promtool: Debian's
# prometheus package, installed when missing (the test skips, saying why,
# where it cannot be had).
step "prometheus"
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
	echo "present"
else
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	prom_install() {
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends \
			prometheus >/dev/null 2>&1
	}
	if command -v apt-get >/dev/null && { prom_install || { $sudo apt-get -qq -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 && prom_install; }; } &&
		command -v prometheus >/dev/null; then
		echo "installed prometheus"
		# The package starts its own server where systemd runs; the test
		# starts one of its own on a free loopback port.
	else
		echo "prometheus could not be installed (apt-get as root or passwordless sudo is needed): the real-Prometheus test will skip"
	fi
fi

# The HTML report is rendered by a real browser (headless Chromium) and the
# live view (gpufeed top) is driven in a real terminal (tmux): Debian's
# chromium and tmux, installed when missing. Where both are present the
# tests are required to run (GPUFEED_REQUIRE_BROWSER, GPUFEED_REQUIRE_TMUX);
# where one cannot be had, its test skips and says why.
step "chromium, tmux"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"
for pkg in chromium tmux; do
	if ! command -v "$pkg" >/dev/null && command -v apt-get >/dev/null; then
		pkg_install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$pkg" >/dev/null 2>&1; }
		pkg_install || { $sudo apt-get -qq -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 && pkg_install; } || true
	fi
	if command -v "$pkg" >/dev/null; then echo "$pkg present"; else echo "$pkg could not be installed (apt-get as root or passwordless sudo is needed): its test will skip"; fi
done
if command -v chromium >/dev/null; then export GPUFEED_REQUIRE_BROWSER=1; fi
if command -v tmux >/dev/null; then export GPUFEED_REQUIRE_TMUX=1; fi

# The agent's image is built and run as the DaemonSet runs it
# (cmd/gpufeed-agent's TestAgentContainer) with podman: podman, runc and
# debootstrap (no registry is reachable: the image's bases are made from
# Debian's packages), installed when missing. scripts/image.sh configures
# podman for itself. Where they cannot be had the test skips and says why.
step "podman, runc, debootstrap"
missing=""
for pkg in podman runc debootstrap; do command -v "$pkg" >/dev/null || missing="$missing $pkg"; done
if [ -z "$missing" ]; then
	echo "present"
else
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo -n"
	ctr_install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends $missing >/dev/null 2>&1; }
	if command -v apt-get >/dev/null && { ctr_install || { $sudo apt-get -qq -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 && ctr_install; }; } &&
		command -v podman >/dev/null; then
		echo "installed$missing"
	else
		echo "$missing could not be installed (apt-get as root or passwordless sudo is needed): the container test will skip"
	fi
fi
# The image's two Debian bases (debootstrap, some minutes on a new machine;
# kept for later runs) are made now: made by the container test itself, they
# ran beside the live tests and starved their jobs of CPU.
if command -v podman >/dev/null && command -v prometheus >/dev/null; then
	if scripts/image.sh --bases; then echo "the image's bases are there"; else echo "the image's bases could not be made: the container test will say why"; fi
fi

# helm lint and helm template over the chart (deploy/validate's
# TestHelmCLI): helm built from its Go module, the version deploy/validate
# renders the chart with. Its build (minutes on 2 CPUs) runs beside the go
# test step below at the lowest priority (nice 19), so that it takes the
# CPU only when the live tests leave it idle, and is waited for before
# deploy/validate.
step "helm"
helm_log=$(mktemp)
helm_pid=""
if command -v helm >/dev/null; then
	echo "present"
else
	nice -n 19 go install helm.sh/helm/v3/cmd/helm@v3.22.0 >"$helm_log" 2>&1 &
	helm_pid=$!
	echo "building helm v3.22.0 in the background"
fi
# The deployment files' module (deploy/validate: the Kubernetes and
# Prometheus Operator API types) is downloaded and compiled the same way, at
# the lowest priority beside the lanes: from empty caches that took about
# 90 s after the lanes had ended. Its failures are the final step's to
# report.
validate_log=$(mktemp)
(cd deploy/validate && nice -n 19 go vet ./... && nice -n 19 go test -count=1 -run '^$' ./...) >"$validate_log" 2>&1 &
validate_pid=$!

# Every test once: the deterministic ones (what make check runs with
# -short) and the live ones, which start real jobs and observe them for
# real windows. The packages where goroutines share state (the sampler, the
# simulated device, the trace reader, the agent, the drills) run under the
# race detector, live tests included, and only there: no live window runs
# twice. In each package the busy live tests run one after the other (their
# verdicts measure who had a CPU); the light ones (idle, frozen or dead
# jobs, HTTP, a browser, a terminal) run side by side after them
# (-parallel). A package that times out reports nothing of its other
# tests, so the limit is well above the expected time.
#
# Two lanes, one package at a time each (as go test's two slots on 2 CPUs
# ran them before): the end-to-end package, most of the time, in one; every
# other package, then the race-detector ones, in the other. Each lane's
# output is kept apart and shown whole when it ends.
race_re='/(sample|sim|kineto|agent|drill)($|/)'
race_pkgs=$(go list ./... | grep -E "$race_re" || true)
e2e_pkg=github.com/gpufeed/gpufeed/cmd/gpufeed
other_pkgs=$(go list ./... | grep -vE "$race_re" | grep -vx "$e2e_pkg")
# Every test binary, the race-detector ones too, is compiled (and linked)
# before its lane runs it, and the lanes run those binaries as go test
# would (in the package's directory, through test2json): compiling the
# race-detector packages beside the end-to-end tests at full priority put a
# load of 12 on 2 CPUs under their verdicts, and go test links each binary
# again (about 30 s of the lanes' CPU). Linking every binary (about 35 s
# with warm caches) held both lanes back: now the end-to-end package's and
# the second lane's first package's binaries are linked first, the lanes
# start, and the others are linked in the background at the lowest priority
# (nice 19: the CPU the serial live tests leave idle), the second lane
# waiting for them (the agent's container test, its first package, takes
# most of a minute).
step "go test: compiling"
lanes=$(mktemp -d)
with_tests() { go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "$@"; }
mkdir "$lanes/bin" "$lanes/bin2" "$lanes/race"
# Only the packages with tests: a binary is named by the package's last
# element (cmd/tracegen has none, internal/tracegen has some), and those
# names must not collide.
other_pkgs=$(with_tests $other_pkgs)
[ -z "$race_pkgs" ] || race_pkgs=$(with_tests $race_pkgs)
dup=$(for p in $other_pkgs $race_pkgs "$e2e_pkg"; do echo "${p##*/}"; done | sort | uniq -d)
if [ -n "$dup" ]; then
	echo "packages with tests share a last element ($dup): their test binaries would overwrite each other"
	exit 1
fi
first_other=$(printf '%s\n' $other_pkgs | head -n 1)
later_others=$(printf '%s\n' $other_pkgs | tail -n +2)
go test -c -o "$lanes/bin/" "$first_other" "$e2e_pkg" >/dev/null
# The background links write into directories of their own, moved into
# place whole: a lane never runs a binary half written. Each batch leaves
# FILE.ok or FILE.failed (with go's output) behind.
(
	if nice -n 19 go test -c -o "$lanes/bin2/" $later_others >"$lanes/link.log" 2>&1; then
		mv "$lanes"/bin2/*.test "$lanes/bin/" && touch "$lanes/link.ok"
	else
		mv "$lanes/link.log" "$lanes/link.failed"
	fi
	if [ -n "$race_pkgs" ]; then
		if nice -n 19 go test -race -c -o "$lanes/race/" $race_pkgs >"$lanes/race.log" 2>&1; then
			touch "$lanes/race.ok"
		else
			mv "$lanes/race.log" "$lanes/race.failed"
		fi
	fi
) &
link_pid=$!
# linked NAME: waits for the background batch NAME (link, race); non-zero,
# with go's output, when it failed.
linked() {
	while [ ! -e "$lanes/$1.ok" ] && [ ! -e "$lanes/$1.failed" ]; do
		kill -0 "$link_pid" 2>/dev/null || { [ -e "$lanes/$1.ok" ] || [ -e "$lanes/$1.failed" ] || { echo "the background link of the $1 binaries ended without a result"; return 1; }; }
		sleep 1
	done
	if [ -e "$lanes/$1.failed" ]; then
		echo "go test -c (the $1 binaries) failed:"
		cat "$lanes/$1.failed"
		return 1
	fi
}
go list -f '{{.ImportPath}} {{.Dir}}' ./... >"$lanes/dirs"
go build -o "$lanes/test2json" cmd/test2json
# The lanes' logs: go test -json, printed as go test prints it, then the
# slowest tests (scripts/testlog), so that a run says where its time went.
go build -o "$lanes/testlog" ./scripts/testlog
# run_binaries BINDIR PKG... -- FLAG...: each package's compiled test
# binary, in its directory, as go test -json runs it; non-zero when any
# failed.
run_binaries() {
	local bindir=$1 rc=0 pkg dir flags=() pkgs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do pkgs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	flags=("$@")
	for pkg in "${pkgs[@]}"; do
		[ -x "$bindir/${pkg##*/}.test" ] || { echo "no test binary for $pkg"; rc=1; continue; }
		dir=$(awk -v p="$pkg" '$1 == p { print $2 }' "$lanes/dirs")
		[ -n "$dir" ] || { echo "no directory for $pkg"; rc=1; continue; }
		# test2json reads the binary's output rather than starting it:
		# it ignores SIGINT, and a binary it started, and every job the
		# tests start, would inherit that (a command that ignores SIGINT
		# is not stopped by a terminal's Ctrl-C; gpufeed then keeps it
		# ignored too, as nohup wants).
		(
			cd "$dir" || exit 1
			"$bindir/${pkg##*/}.test" -test.v=test2json -test.timeout=30m "${flags[@]}" 2>&1 | "$lanes/test2json" -t -p "$pkg"
			exit "${PIPESTATUS[0]}"
		) || rc=1
	done
	return $rc
}
lint_rc=0
wait "$lint_pid" || lint_rc=$?
cat "$lint_log"
rm -f "$lint_log"
if [ "$lint_rc" != 0 ]; then
	echo "scripts/lint.sh failed (exit $lint_rc)"
	exit 1
fi
step "go test (every test; live ones once), in two lanes"
# The straggler tests (real torch ranks, about 85 s) and the Python-time
# ones (a torch training loop's Python stacks, about 50 s) run in the
# second lane once its packages are done: what they judge is which rank the
# others wait for, one rank against the others, and where one thread's
# Python time went, shares that a load from outside the job shifts for all
# alike. So do the tests of dead ranks (which rank ended, from the kernel
# log: launched, attached, compared across nodes), which even the lanes
# out: the straggler and Python-time tests' shared jobs made the second
# lane end before the first.
moved='^(TestStragglers?[A-Z]|TestPythonTime[A-Z]|TestGlooRanksLaunched$|TestDeadRankNamedAfterAttach$|TestCompareDeathsAcrossNodes$)'
(
	set +e
	# GPUFEED_TEST_JSON=FILE keeps the lane's go test -json stream there.
	# -parallel 8: with 12 (tried) the light group took no less time (it
	# is short of CPU, not of slots), and its two launched start-up tests
	# failed: gpufeed, starved of CPU, began its window after the
	# command's start-up had ended.
	run_binaries "$lanes/bin" "$e2e_pkg" -- -test.parallel=8 -test.skip="$moved" 2>&1 | tee "${GPUFEED_TEST_JSON:-/dev/null}" | "$lanes/testlog" -slowest 20 >"$lanes/e2e" 2>&1
	echo "${PIPESTATUS[0]}" >"$lanes/e2e.rc"
) &
e2e_pid=$!
# The other lane goes through testlog too (its slowest tests named with
# their package); GPUFEED_TEST_JSON=FILE keeps its stream in FILE.rest.
rest_json=/dev/null
[ -z "${GPUFEED_TEST_JSON:-}" ] || rest_json="$GPUFEED_TEST_JSON.rest"
echo 0 >"$lanes/rest.rc"
{
	run_binaries "$lanes/bin" "$first_other" -- -test.parallel=8 || echo 1 >"$lanes/rest.rc"
	if linked link; then
		run_binaries "$lanes/bin" $later_others -- -test.parallel=8 || echo 1 >"$lanes/rest.rc"
	else
		echo 1 >"$lanes/rest.rc"
	fi
	if [ -n "$race_pkgs" ]; then
		printf -- '-- the race detector on the concurrent packages\n'
		if linked race; then
			run_binaries "$lanes/race" $race_pkgs -- -test.parallel=8 || echo 1 >"$lanes/rest.rc"
		else
			echo 1 >"$lanes/rest.rc"
		fi
	fi
	printf -- '-- the end-to-end package'"'"'s straggler, Python-time and rank-death tests\n'
	run_binaries "$lanes/bin" "$e2e_pkg" -- -test.parallel=8 -test.run="$moved" || echo 1 >"$lanes/rest.rc"
} 2>&1 | tee "$rest_json" | "$lanes/testlog" -slowest 15 >"$lanes/rest" 2>&1 || echo 1 >"$lanes/rest.rc"
rest_rc=$(cat "$lanes/rest.rc")
cat "$lanes/rest"
wait "$e2e_pid" || true
cat "$lanes/e2e"
e2e_rc=$(cat "$lanes/e2e.rc")
wait "$link_pid" 2>/dev/null || true
rm -rf "$lanes"
if [ "$rest_rc" != 0 ] || [ "$e2e_rc" != 0 ]; then
	echo "go test failed (end-to-end package: exit $e2e_rc; the other packages: exit $rest_rc)"
	exit 1
fi

# The deployment files, decoded strictly into the Kubernetes and Prometheus
# Operator API types by a module of its own (those types stay out of
# gpufeed's dependencies).
step "deploy/validate"
if [ -n "$helm_pid" ] && ! wait "$helm_pid"; then
	cat "$helm_log"
	echo "go install helm.sh/helm/v3/cmd/helm@v3.22.0 failed"
	exit 1
fi
rm -f "$helm_log"
wait "$validate_pid" || true
rm -f "$validate_log"
helm version --short
(cd deploy/validate && go vet ./... && GPUFEED_REQUIRE_HELM=1 go test -count=1 ./...)
