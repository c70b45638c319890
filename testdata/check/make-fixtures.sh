#!/usr/bin/env bash
# Builds the procfs/sysfs fixture trees that gpufeed check's tests and golden
# outputs run over. The trees are committed; this script is their readable
# source. Run it from anywhere; it rewrites testdata/check/<scenario>/.
#
# The machine: a dual-socket server, 2 x 8 cores with SMT (32 CPUs), NUMA
# node 0 = CPUs 0-7,16-23 and node 1 = CPUs 8-15,24-31, Linux 6.8, 1 TiB of
# RAM, and 8 NVIDIA A100 (PCIe Gen4 x16) behind four PCIe switches, two per
# socket, with an NVMe drive and a ConnectX-6 InfiniBand NIC beside the first
# GPUs of each socket.
#
# Scenarios:
#   server             the healthy machine, no target process
#   server-downgraded  GPU 0000:92:00.0 negotiated Gen3 x8 (a riser)
#   wrong-numa         pid 4242 uses GPU 0000:03:00.0 (node 0) but is bound to node 1
#   powersave          every CPU on the powersave governor
#   container-shm      pid 4242 in a container with Docker's 64 MiB /dev/shm
#   nfs-retrans        pid 4242 reads /datasets/imagenet from NFS that retransmits
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

w() { # w FILE CONTENT...: write a file, creating its directory
	mkdir -p "$(dirname "$1")"
	local f=$1
	shift
	printf '%s\n' "$@" >"$f"
}

node_of_cpu() { local c=$1; if (( (c % 16) < 8 )); then echo 0; else echo 1; fi; }

make_cpus() { # make_cpus SYSROOT GOVERNOR CURKHZ
	local sys=$1 gov=$2 cur=$3 c
	for c in $(seq 0 31); do
		local d=$sys/devices/system/cpu/cpu$c core=$((c % 16)) pkg
		pkg=$(node_of_cpu "$c")
		w "$d/topology/physical_package_id" "$pkg"
		w "$d/topology/core_id" "$((core % 8))"
		w "$d/topology/thread_siblings_list" "$core,$((core + 16))"
		w "$d/cpufreq/scaling_governor" "$gov"
		w "$d/cpufreq/scaling_driver" "intel_pstate"
		w "$d/cpufreq/scaling_cur_freq" "$cur"
		w "$d/cpufreq/cpuinfo_max_freq" "3800000"
		w "$d/cpufreq/scaling_max_freq" "3800000"
		[ "$c" -gt 0 ] && w "$d/online" "1"
	done
	w "$sys/devices/system/cpu/online" "0-31"
	w "$sys/devices/system/cpu/isolated" ""
	w "$sys/devices/system/cpu/nohz_full" "(null)"
	w "$sys/devices/system/cpu/smt/control" "on"
	w "$sys/devices/system/cpu/smt/active" "1"
	w "$sys/devices/system/node/node0/cpulist" "0-7,16-23"
	w "$sys/devices/system/node/node1/cpulist" "8-15,24-31"
	w "$sys/kernel/mm/transparent_hugepage/enabled" "always [madvise] never"
	w "$sys/kernel/mm/transparent_hugepage/defrag" "always defer defer+madvise [madvise] never"
}

# pci SYSROOT PATH CLASS VENDOR DEVICE CURGTS CURW MAXGTS MAXW NODE
# PATH is the device path below /sys/devices: pci0000:00/0000:00:01.0/...
pci() {
	local sys=$1 path=$2 class=$3 vendor=$4 device=$5 cur=$6 curw=$7 max=$8 maxw=$9 node=${10}
	local addr=${path##*/} d=$sys/devices/$path cpus
	if [ "$node" = 0 ]; then cpus="0-7,16-23"; else cpus="8-15,24-31"; fi
	w "$d/class" "$class"
	w "$d/vendor" "$vendor"
	w "$d/device" "$device"
	w "$d/current_link_speed" "$cur GT/s PCIe"
	w "$d/current_link_width" "$curw"
	w "$d/max_link_speed" "$max GT/s PCIe"
	w "$d/max_link_width" "$maxw"
	w "$d/numa_node" "$node"
	w "$d/local_cpulist" "$cpus"
	mkdir -p "$sys/bus/pci/devices"
	ln -sfn "../../../devices/$path" "$sys/bus/pci/devices/$addr"
}

# switch_with SYSROOT ROOTCPLX ROOTPORT SWBUS NODE DEV... where DEV is
# "kind:address:curGTs:curWidth" and kind is gpu, nvme or nic.
switch_with() {
	local sys=$1 rc=$2 rp=$3 bus=$4 node=$5
	shift 5
	local up="0000:$bus:00.0" downbus i=0 dev
	downbus=$(printf '%02x' $((16#$bus + 1)))
	pci "$sys" "$rc/$rp" 0x060400 0x8086 0x347a 16.0 16 16.0 16 "$node"
	pci "$sys" "$rc/$rp/$up" 0x060400 0x1000 0xc010 16.0 16 16.0 16 "$node"
	for dev in "$@"; do
		local kind addr cur curw port
		IFS=: read -r kind addr cur curw <<<"$dev"
		addr=${addr//_/:}
		port="0000:$downbus:$(printf '%02x' $i).0"
		pci "$sys" "$rc/$rp/$up/$port" 0x060400 0x1000 0xc010 "$cur" "$curw" 16.0 16 "$node"
		case $kind in
		gpu) pci "$sys" "$rc/$rp/$up/$port/$addr" 0x030200 0x10de 0x20b0 "$cur" "$curw" 16.0 16 "$node" ;;
		nvme) pci "$sys" "$rc/$rp/$up/$port/$addr" 0x010802 0x144d 0xa824 "$cur" "$curw" 16.0 4 "$node" ;;
		nic) pci "$sys" "$rc/$rp/$up/$port/$addr" 0x020700 0x15b3 0x101b "$cur" "$curw" 16.0 16 "$node" ;;
		esac
		i=$((i + 1))
	done
}

make_sys() { # make_sys SYSROOT GOVERNOR CURKHZ DOWNGRADED_GPU_LINK
	local sys=$1
	rm -rf "$sys"
	make_cpus "$sys" "$2" "$3"
	switch_with "$sys" pci0000:00 0000:00:01.0 01 0 gpu:0000_03_00.0:16.0:16 gpu:0000_04_00.0:16.0:16 nvme:0000_05_00.0:16.0:4 nic:0000_06_00.0:16.0:16
	switch_with "$sys" pci0000:00 0000:00:03.0 10 0 gpu:0000_12_00.0:16.0:16 gpu:0000_13_00.0:16.0:16
	switch_with "$sys" pci0000:80 0000:80:01.0 81 1 gpu:0000_83_00.0:16.0:16 gpu:0000_84_00.0:16.0:16 nvme:0000_85_00.0:16.0:4 nic:0000_86_00.0:16.0:16
	switch_with "$sys" pci0000:80 0000:80:03.0 90 1 "gpu:0000_92_00.0:$4" gpu:0000_93_00.0:16.0:16
	rdma "$sys" mlx5_0 0000:06:00.0
	rdma "$sys" mlx5_1 0000:86:00.0
}

rdma() { # rdma SYSROOT NAME PCIADDR: the RDMA device the mlx5 driver registers for a NIC
	local sys=$1 dev
	dev=$(cd "$sys" && find devices -type d -name "$3" | head -n 1)
	mkdir -p "$sys/$dev/infiniband/$2" "$sys/class/infiniband"
	echo "1: CA" >"$sys/$dev/infiniband/$2/node_type"
	ln -sfn "../../$dev/infiniband/$2" "$sys/class/infiniband/$2"
}

interrupts() { # 32 CPU columns; NVIDIA, mlx5 and NVMe IRQs spread by irqbalance
	local hdr="" c line
	for c in $(seq 0 31); do hdr+=$(printf '%11s' "CPU$c"); done
	echo "$hdr"
	row() { # row LABEL BASE STEP DESC
		line=$(printf '%4s:' "$1")
		for c in $(seq 0 31); do line+=$(printf '%11d' $(($2 + (c * $3) % 997))); done
		echo "$line  $4"
	}
	row 0 40 0 "IO-APIC    2-edge      timer"
	row 120 1000 13 "PCI-MSIX-0000:03:00.0   0-edge      nvidia"
	row 121 1000 17 "PCI-MSIX-0000:04:00.0   0-edge      nvidia"
	row 140 90000 31 "PCI-MSIX-0000:06:00.0   0-edge      mlx5_comp0@pci:0000:06:00.0"
	row 160 52000 7 "PCI-MSIX-0000:05:00.0   1-edge      nvme0q1"
	row LOC 8000000 101 "Local timer interrupts"
	row RES 30000 11 "Rescheduling interrupts"
	echo " ERR:          0"
}

make_proc() { # make_proc PROCROOT
	local proc=$1
	rm -rf "$proc"
	w "$proc/cmdline" "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=4f0c2f3e-8d1b-4a55-9d3e-2f1b8c7d6e5a ro quiet splash"
	w "$proc/sys/kernel/osrelease" "6.8.0-45-generic"
	w "$proc/uptime" "864000.52 27000000.10"
	w "$proc/sys/vm/dirty_ratio" "20"
	w "$proc/sys/vm/dirty_background_ratio" "10"
	w "$proc/sys/vm/dirty_bytes" "0"
	w "$proc/sys/vm/dirty_background_bytes" "0"
	w "$proc/meminfo" \
		"MemTotal:       1056426240 kB" \
		"MemFree:        612304512 kB" \
		"MemAvailable:   901112832 kB" \
		"Buffers:          2101248 kB" \
		"Cached:         281004032 kB" \
		"SwapCached:             0 kB" \
		"Dirty:             184320 kB" \
		"Writeback:              0 kB" \
		"SwapTotal:        8388604 kB" \
		"SwapFree:         8388604 kB"
	w "$proc/pressure/cpu" "some avg10=1.20 avg60=0.95 avg300=0.80 total=912345678" "full avg10=0.00 avg60=0.00 avg300=0.00 total=0"
	w "$proc/pressure/memory" "some avg10=0.00 avg60=0.00 avg300=0.00 total=1234567" "full avg10=0.00 avg60=0.00 avg300=0.00 total=654321"
	w "$proc/pressure/io" "some avg10=0.40 avg60=0.31 avg300=0.20 total=45678901" "full avg10=0.10 avg60=0.08 avg300=0.05 total=12345678"
	interrupts >"$proc/interrupts"
	local i=0 a
	for a in 0000:03:00.0 0000:04:00.0 0000:12:00.0 0000:13:00.0 0000:83:00.0 0000:84:00.0 0000:92:00.0 0000:93:00.0; do
		w "$proc/driver/nvidia/gpus/$a/information" \
			"Model: 		 NVIDIA A100-SXM4-40GB" "IRQ:   		 $((120 + i))" \
			"GPU UUID: 	 GPU-00000000-0000-0000-0000-00000000000$i" "Video BIOS: 	 92.00.45.00.05" \
			"Bus Type: 	 PCIe" "DMA Size: 	 47 bits" "Bus Location: 	 $a" "Device Minor: 	 $i"
		i=$((i + 1))
	done
	# gpufeed's own process: what --pid-less runs read for limits and mounts.
	ln -sfn 4000 "$proc/self"
	process "$proc" 4000 gpufeed "0-31" "0-1" 1048576 unlimited unlimited host
}

# process PROCROOT PID NAME CPUS MEMS NOFILE MEMLOCK NPROC MOUNTS
process() {
	local proc=$1 pid=$2 name=$3 cpus=$4 mems=$5 nofile=$6 memlock=$7 nproc=$8 mounts=$9
	local d=$proc/$pid
	local status=(
		"Name:	$name" "Umask:	0022" "State:	S (sleeping)" "Tgid:	$pid" "Pid:	$pid" "PPid:	1"
		"Threads:	48" "VmLck:	       0 kB" "VmPin:	  524288 kB"
		"Cpus_allowed_list:	$cpus" "Mems_allowed_list:	$mems"
		"voluntary_ctxt_switches:	1200" "nonvoluntary_ctxt_switches:	300")
	w "$d/status" "${status[@]}"
	w "$d/task/$pid/status" "${status[@]}"
	w "$d/task/$pid/stat" "$pid ($name) S 1 $pid $pid 0 -1 4194560 100 0 0 0 5000 900 0 0 20 0 48 0 1000 100000000 20000 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 ${cpus%%[-,]*} 0 0 0 0 0"
	w "$d/limits" \
		"Limit                     Soft Limit           Hard Limit           Units     " \
		"Max cpu time              unlimited            unlimited            seconds   " \
		"Max open files            $nofile              1048576              files     " \
		"Max locked memory         $memlock            $memlock            bytes     " \
		"Max processes             $nproc            $nproc            processes "
	case $mounts in
	host)
		w "$d/mountinfo" \
			"22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw" \
			"25 22 0:21 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,inode64" \
			"30 22 259:3 / /scratch rw,noatime shared:9 - xfs /dev/nvme1n1 rw,attr2,inode64"
		w "$d/mountstats" \
			"device /dev/nvme0n1p2 mounted on / with fstype ext4" \
			"device tmpfs mounted on /dev/shm with fstype tmpfs" \
			"device /dev/nvme1n1 mounted on /scratch with fstype xfs"
		;;
	container)
		w "$d/mountinfo" \
			"812 640 0:120 / / rw,relatime master:310 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B,upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/docker/overlay2/x/work" \
			"820 812 0:125 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64" \
			"824 812 259:3 /datasets /data ro,noatime - xfs /dev/nvme1n1 rw,attr2,inode64"
		w "$d/mountstats" \
			"device overlay mounted on / with fstype overlay" \
			"device shm mounted on /dev/shm with fstype tmpfs" \
			"device /dev/nvme1n1 mounted on /data with fstype xfs"
		;;
	nfs)
		w "$d/mountinfo" \
			"22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw" \
			"25 22 0:21 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,inode64" \
			"41 22 0:52 / /datasets rw,relatime shared:30 - nfs4 filer01:/export/datasets rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.7,local_lock=none,addr=10.0.0.2"
		w "$d/mountstats" \
			"device /dev/nvme0n1p2 mounted on / with fstype ext4" \
			"device tmpfs mounted on /dev/shm with fstype tmpfs" \
			"device filer01:/export/datasets mounted on /datasets with fstype nfs4 statvers=1.1" \
			"	opts:	rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,acregmax=60,acdirmin=30,acdirmax=60,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.7,local_lock=none" \
			"	age:	86400" \
			"	caps:	caps=0x3ffbffff,wtmult=512,dtsize=32768,bsize=0,namlen=255" \
			"	sec:	flavor=1,pseudoflavor=1" \
			"	events:	411802 50322 0 12 50322 90 602000 0 0 182744 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0" \
			"	bytes:	191624634368 0 0 0 191624634368 0 46782464 0" \
			"	RPC iostats version: 1.1  p/v: 100003/4 (nfs)" \
			"	xprt:	tcp 875 1 3 0 12 248391 247188 0 1845032 0 64 1200 3400" \
			"	per-op statistics" \
			"	        NULL: 1 1 0 44 24 0 0 0 0" \
			"	        READ: 182744 183700 3 36549200 191654877184 52000 9137200 9201400 0" \
			"	     GETATTR: 411802 412050 0 65888320 98832480 1200 823604 830000 0" \
			"	        OPEN: 50322 50330 0 14090160 20128800 300 150966 152000 0" \
			"	      LOOKUP: 20122 20125 0 3219520 5231720 80 40244 41000 0"
		;;
	esac
	if [ "$name" != gpufeed ]; then
		# Most anonymous memory on the node the process is bound to.
		w "$d/numa_maps" \
			"55d4c3a00000 default file=/usr/bin/python3.11 mapped=900 N0=900 kernelpagesize_kB=4" \
			"7f2a40000000 default anon=3145728 dirty=3145728 active=0 N$mems=3145728 kernelpagesize_kB=4" \
			"7f2c40000000 default anon=262144 dirty=262144 N$((1 - mems))=262144 kernelpagesize_kB=4" \
			"7f3000000000 default file=/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 mapped=12000 mapmax=8 N0=6000 N1=6000 kernelpagesize_kB=4"
		mkdir -p "$d/fd"
		ln -sfn /dev/null "$d/fd/0"
		ln -sfn /dev/nvidiactl "$d/fd/7"
		ln -sfn /dev/nvidia-uvm "$d/fd/8"
		ln -sfn /dev/nvidia0 "$d/fd/9"
		ln -sfn /datasets/imagenet/train-00001.tar "$d/fd/12"
	fi
}

nfs_client() {
	w "$1/net/rpc/nfs" \
		"net 0 0 0 0" \
		"rpc 248391 1203 0" \
		"proc4 69 1 182744 0 0 50322 0 0 0 50300 0 0 0 0 0 0 0 0 6000 411802 20122 1 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
}

# The healthy server.
make_sys server/sys performance 3400000 16.0:16
make_proc server/proc

# One link negotiated Gen3 x8 behind a riser.
mkdir -p server-downgraded
make_sys server-downgraded/sys performance 3400000 8.0:8
ln -sfn ../server/proc server-downgraded/proc

# The powersave governor, cores idling at 800 MHz.
mkdir -p powersave
make_sys powersave/sys powersave 800000 16.0:16
ln -sfn ../server/proc powersave/proc

# A process bound to node 1 that uses GPU0 on node 0; most of its memory on node 1.
mkdir -p wrong-numa
make_proc wrong-numa/proc
process wrong-numa/proc 4242 python3 "8-15,24-31" "1" 1048576 unlimited unlimited host
ln -sfn ../server/sys wrong-numa/sys

# A container with Docker's default /dev/shm and memlock.
mkdir -p container-shm
make_proc container-shm/proc
process container-shm/proc 4242 python3 "0-7,16-23" "0" 1048576 65536 unlimited container
ln -sfn ../server/sys container-shm/sys

# A dataset on NFS that retransmits and chatters metadata.
mkdir -p nfs-retrans
make_proc nfs-retrans/proc
process nfs-retrans/proc 4242 python3 "0-7,16-23" "0" 1048576 unlimited unlimited nfs
nfs_client nfs-retrans/proc
ln -sfn ../server/sys nfs-retrans/sys
