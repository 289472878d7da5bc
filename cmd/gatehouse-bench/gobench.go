package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The pure parts on every call's path, and what `make bench` runs of them.
var (
	goBenchPattern  = "Decide|ContentHash|Posterior|Check"
	goBenchPackages = []string{"./internal/policy", "./internal/receipts", "./internal/trust", "./internal/strictjson"}
	// goBenchExpected are the pattern's parts; a part no benchmark matched
	// is reported as missing, not as an error.
	goBenchExpected = []string{"Decide", "ContentHash", "Posterior", "Check"}
)

// decideTarget is the budget of one pure decision.
const decideTarget = 2 * time.Microsecond

// goBench is one Go benchmark's result.
type goBench struct {
	Package, Name string
	NsPerOp       float64
	BytesPerOp    int64 // -1: not reported
	AllocsPerOp   int64 // -1: not reported
}

// goBenchResults are the benchmarks that ran and the expected ones that
// do not exist (yet) in this tree.
type goBenchResults struct {
	Benchmarks []goBench
	Missing    []string
	BenchTime  time.Duration
}

// runGoBenchmarks runs the micro-benchmarks from the module's root (the
// working directory) with `go test -bench`.
func runGoBenchmarks(ctx context.Context, benchtime time.Duration) (goBenchResults, error) {
	res := goBenchResults{BenchTime: benchtime}
	args := append([]string{"test", "-run", "^$", "-bench", goBenchPattern, "-benchmem", "-count", "1", "-benchtime", benchtime.String()}, goBenchPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	res.Benchmarks = parseGoBench(out.String())
	for _, part := range goBenchExpected {
		found := false
		for _, b := range res.Benchmarks {
			if strings.Contains(b.Name, part) {
				found = true
				break
			}
		}
		if !found {
			res.Missing = append(res.Missing, "Benchmark"+part)
		}
	}
	return res, nil
}

// parseGoBench reads `go test -bench -benchmem` output: "pkg: …" lines
// name the package of the benchmark lines after them.
func parseGoBench(out string) []goBench {
	var res []goBench
	pkg := ""
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		line := s.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/gatehouse/gatehouse/")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		b := goBench{Package: pkg, Name: f[0], BytesPerOp: -1, AllocsPerOp: -1}
		if i := strings.LastIndexByte(b.Name, '-'); i > 0 {
			if _, err := strconv.Atoi(b.Name[i+1:]); err == nil {
				b.Name = b.Name[:i] // the GOMAXPROCS suffix
			}
		}
		ok := false
		for i := 2; i+1 < len(f); i++ {
			switch f[i+1] {
			case "ns/op":
				b.NsPerOp, _ = strconv.ParseFloat(f[i], 64)
				ok = true
			case "B/op":
				b.BytesPerOp, _ = strconv.ParseInt(f[i], 10, 64)
			case "allocs/op":
				b.AllocsPerOp, _ = strconv.ParseInt(f[i], 10, 64)
			}
		}
		if ok {
			res = append(res, b)
		}
	}
	return res
}
