package main

import (
	"os"
	"strings"
	"testing"
)

func TestZZExplore(t *testing.T) {
	setup := strings.Split(os.Getenv("SETUP"), ";;")
	var cmds [][]string
	for _, q := range strings.Split(os.Getenv("QS"), ";;") {
		cmds = append(cmds, []string{"sql", q})
	}
	through, alone := bothWays(t, setup, cmds...)
	for i, c := range cmds {
		if through[i] != alone[i] {
			t.Errorf("%q through run:\n%s\non the stopped file:\n%s", c, through[i], alone[i])
		} else {
			t.Logf("%q same:\n%s", c, through[i])
		}
	}
}
