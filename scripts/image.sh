#!/usr/bin/env bash
# make image: builds the node agent's image (Containerfile) with podman or
# docker, as IMAGE (default gpufeed-agent:VERSION of the chart).
#
# With no registry in reach (these machines), both stages' bases are made
# from Debian's packages, once, and kept as local images:
#   localhost/gpufeed-base:bookworm-slim   debootstrap --variant=minbase bookworm, slimmed
#   localhost/gpufeed-build:bookworm-goX   the same plus gcc, libc6-dev and
#                                          this machine's Go toolchain (1.26)
# and the modules come from the module proxy into the build context
# (go mod vendor). Set GO_IMAGE and BASE_IMAGE (e.g. golang:1.26-bookworm
# and debian:bookworm-slim) to build from a registry instead.
#
# It installs what it lacks (podman, runc, debootstrap: apt-get as root or
# passwordless sudo). podman is run with its own configuration (the
# CONTAINERS_CONF this script writes): no default ulimits (the ones podman
# sets are refused on these machines) and the runc runtime (crun refuses
# their hybrid cgroup layout). `eval "$(scripts/image.sh --env)"` sets the
# same for running podman by hand.
set -euo pipefail
# runc, debootstrap and the iptables podman's network plugins run live in sbin,
# which a minimal PATH (env -i, cron, some CI runners) leaves out.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac
cd "$(dirname "$0")/.."
root=$(pwd)

appversion=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' deploy/helm/gpufeed/Chart.yaml)
image=${IMAGE:-gpufeed-agent:$appversion}
# --image: the image's name, as the manifests and the chart's defaults
# must name it.
if [ "${1:-}" = --image ]; then
	echo "$image"
	exit 0
fi

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo -n"
apt_install() {
	command -v apt-get >/dev/null || return 1
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
		{ $sudo apt-get -qq -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 &&
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" >/dev/null 2>&1; }
}

# The engine: podman (preferred: no daemon), else a docker whose daemon
# answers, else podman installed.
engine=${ENGINE:-}
if [ -z "$engine" ]; then
	if command -v podman >/dev/null; then
		engine=podman
	elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
		engine=docker
	else
		echo "image: installing podman, runc" >&2
		apt_install podman runc || { echo "image: neither podman nor a running docker, and podman could not be installed (apt-get as root or passwordless sudo is needed)" >&2; exit 1; }
		engine=podman
	fi
fi
run_flags=()
if [ "$engine" = podman ]; then
	command -v runc >/dev/null || apt_install runc || true
	conf=${XDG_RUNTIME_DIR:-/tmp}/gpufeed-containers.conf
	{
		printf '[containers]\ndefault_ulimits = []\n'
		if command -v runc >/dev/null; then printf '[engine]\nruntime = "runc"\n'; fi
	} >"$conf"
	export CONTAINERS_CONF=$conf
	if command -v runc >/dev/null; then run_flags=(--runtime "$(command -v runc)"); fi
fi
# --env: shell assignments (eval "$(scripts/image.sh --env)"): the engine,
# podman's configuration and its runtime, to run the image by hand as the
# tests do.
if [ "${1:-}" = --env ]; then
	if [ -n "${CONTAINERS_CONF:-}" ]; then printf 'export CONTAINERS_CONF=%q\n' "$CONTAINERS_CONF"; fi
	printf 'ENGINE=%q\n' "$engine"
	printf 'RUNTIME=%q\n' "${run_flags[1]:-}"
	exit 0
fi

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}

have_image() { "$engine" image inspect "$1" >/dev/null 2>&1; }

# debootstrap_import NAME [PACKAGES]: a bookworm minbase (plus PACKAGES),
# imported as NAME; with Go, the host's toolchain under /usr/local/go.
debootstrap_import() {
	local name=$1 include=${2:-} goroot=${3:-}
	command -v debootstrap >/dev/null || apt_install debootstrap || { echo "image: debootstrap is not installed and could not be (apt-get as root or passwordless sudo is needed); set GO_IMAGE and BASE_IMAGE to images of a registry" >&2; exit 1; }
	local dir
	dir=$(mktemp -d /var/tmp/gpufeed-rootfs.XXXXXX)
	echo "image: debootstrap bookworm${include:+ with $include} for $name" >&2
	$sudo debootstrap --variant=minbase ${include:+--include=$include} bookworm "$dir" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$dir.log" 2>&1 ||
		{ tail -20 "$dir.log" >&2; exit 1; }
	rm -f "$dir.log"
	# What debootstrap leaves that an image does not want: its package
	# cache and lists (debian:bookworm-slim has neither).
	$sudo rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/debootstrap
	if [ -z "$goroot" ]; then
		# The runtime base is slimmed as debian:bookworm-slim is
		# (debuerreotype's slimify): no documentation but the copyright
		# files, no manuals, no translations, and dpkg told to keep it so.
		$sudo tee "$dir/etc/dpkg/dpkg.cfg.d/docker" >/dev/null <<-'EOF'
			path-exclude /usr/share/doc/*
			path-include /usr/share/doc/*/copyright
			path-exclude /usr/share/groff/*
			path-exclude /usr/share/info/*
			path-exclude /usr/share/linda/*
			path-exclude /usr/share/lintian/overrides/*
			path-exclude /usr/share/locale/*
			path-exclude /usr/share/man/*
		EOF
		$sudo find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
		$sudo find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
		$sudo rm -rf "$dir"/usr/share/{groff,info,linda,locale,man}/* "$dir"/usr/share/lintian/overrides/*
	fi
	if [ -n "$goroot" ]; then
		$sudo mkdir -p "$dir/usr/local"
		$sudo cp -a "$goroot" "$dir/usr/local/go"
	fi
	$sudo tar -C "$dir" -c . | "$engine" import --change 'CMD ["/bin/bash"]' - "$name" >/dev/null
	$sudo rm -rf "$dir"
}

# --bases: make the two local bases when missing, and build nothing
# (make test does it before its live tests, which a debootstrap beside
# them would starve of CPU).
if [ "${1:-}" = --bases ]; then
	if [ -n "${GO_IMAGE:-}${BASE_IMAGE:-}" ]; then exit 0; fi
	gover=$(go env GOVERSION)
	have_image localhost/gpufeed-base:bookworm-slim || debootstrap_import localhost/gpufeed-base:bookworm-slim
	have_image "localhost/gpufeed-build:bookworm-$gover" || debootstrap_import "localhost/gpufeed-build:bookworm-$gover" gcc,libc6-dev "$(go env GOROOT)"
	exit 0
fi

ctx=$(mktemp -d /var/tmp/gpufeed-image-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
git ls-files -co --exclude-standard -z | tar --null -T - -c | tar -C "$ctx" -x
build_args=(--build-arg "VERSION=$version")
if [ -z "${GO_IMAGE:-}${BASE_IMAGE:-}" ]; then
	gover=$(go env GOVERSION)
	case "$gover" in go1.26*) ;; *) echo "image: the offline build copies this machine's Go toolchain into its build stage: want go1.26, have $gover" >&2; exit 1 ;; esac
	base=localhost/gpufeed-base:bookworm-slim
	build=localhost/gpufeed-build:bookworm-$gover
	have_image "$base" || debootstrap_import "$base"
	have_image "$build" || debootstrap_import "$build" gcc,libc6-dev "$(go env GOROOT)"
	# The modules are vendored and the bases local: the build needs no
	# network, and without one no network plugin (nor iptables) runs.
	build_args+=(--build-arg "GO_IMAGE=$build" --build-arg "BASE_IMAGE=$base" --network none)
	(cd "$ctx" && go mod vendor)
	# The image holds gpufeed-agent alone: the vendored modules none of its
	# packages come from (the module's pure-Go SQLite and C library among
	# them, 138 MB of the 160) stay out of the context, which the build
	# copies whole (COPY . .). A build that needed one would fail naming
	# the package it cannot find.
	(cd "$ctx" && go list -mod=vendor -deps -f '{{if not .Standard}}{{.Module.Path}}{{end}}' ./cmd/gpufeed-agent | sort -u) >"$ctx/.agent-modules"
	grep '^# ' "$ctx/vendor/modules.txt" | awk '{print $2}' | sort -u | while read -r mod; do
		grep -qxF "$mod" "$ctx/.agent-modules" && continue
		grep -qF "$mod/" "$ctx/.agent-modules" && continue # a kept module below it
		rm -rf "${ctx:?}/vendor/$mod"
	done
	rm -f "$ctx/.agent-modules"
else
	build_args+=(--build-arg "GO_IMAGE=${GO_IMAGE:-docker.io/library/golang:1.26-bookworm}" --build-arg "BASE_IMAGE=${BASE_IMAGE:-docker.io/library/debian:bookworm-slim}")
fi
echo "image: $engine build $image" >&2
"$engine" build "${run_flags[@]}" "${build_args[@]}" -f "$ctx/Containerfile" -t "$image" "$ctx"
# The build stage's image (untagged, hundreds of MB) is not kept: the
# build cache (a cache mount) is what makes the next build quick.
"$engine" image prune -f --filter label=io.github.gpufeed.stage=build >/dev/null || true
echo "image: built $image ($("$engine" image inspect --format '{{.Size}}' "$image") bytes)" >&2
