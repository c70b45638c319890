package sample

import "runtime"

func runtimeNumCPU() int { return runtime.NumCPU() }
