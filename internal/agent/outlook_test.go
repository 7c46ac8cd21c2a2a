package agent

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
)

// TestOutlook: the outlook of the defaults is what README's quick start
// says, and each part follows its key.
func TestOutlook(t *testing.T) {
	cfg := config.Default()
	prof, err := cfg.ResolveProfile()
	if err != nil {
		t.Fatal(err)
	}
	cold, err := cfg.ColdProfile()
	if err != nil {
		t.Fatal(err)
	}
	o := NewOutlook(cfg, prof, cold, 5*time.Second)
	if o.FirstFill != 2048<<20 || o.Steady != 2048<<20 || o.Startup != 110<<20 || o.FirstCold <= o.Cold || o.DailyBudget != 10<<30 {
		t.Errorf("default outlook %+v", o)
	}
	if want := o.FirstFill + o.FirstCold + o.Startup; o.FirstHour != want {
		t.Errorf("first hour %d, want the first fill, the first cold cycle and the images: %d", o.FirstHour, want)
	}
	if want := 4*o.Steady + 2*o.Cold; o.PerDay != want {
		t.Errorf("per day %d, want 4 steady and 2 cold cycles: %d", o.PerDay, want)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("**%s in the first hour, %s\non the first day, %s on each day after**", mib(o.FirstHour), mib(o.FirstDay), mib(o.PerDay))
	if !strings.Contains(string(readme), want) {
		t.Errorf("README's quick start does not say %q", want)
	}
	if cold := "a cold cycle\nevery 12 h about " + mib(o.Cold); !strings.Contains(string(readme), cold) {
		t.Errorf("README's quick start does not say %q", cold)
	}
	if !strings.Contains(o.String(), "at most 2821 MiB in the first hour") {
		t.Errorf("outlook line %q", o)
	}

	// No first fill, no cold probe, no daily budget: regular cycles only.
	cfg.Agent.FirstFill.MaxBytes, cfg.Agent.ColdInterval, cfg.Agent.DailyByteBudget = 0, 0, 0
	cfg.Agent.Interval = 30 * time.Minute
	o = NewOutlook(cfg, prof, cold, 5*time.Second)
	if o.FirstHour != 2*o.Steady || o.PerDay != 48*o.Steady || o.FirstCold != 0 || o.Startup != 0 {
		t.Errorf("outlook without fill, cold probe or budget, every 30m: %+v", o)
	}
}
