package pysample

import (
	"os"
	"os/exec"
	"strconv"
	"time"
)

var execCommand = exec.Command

// waitThreads waits (up to 30 s) until pid has n threads.
func waitThreads(pid, n int) {
	for i := 0; i < 300; i++ {
		es, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if len(es) >= n {
			time.Sleep(200 * time.Millisecond)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
