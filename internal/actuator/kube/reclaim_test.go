package kube

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpupack/gpupack/reclaim"
)

func TestTrimLedger(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{}}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// Open records first (older), then closed ones (newer).
	for i := range MaxLedgerRecords + 5 {
		outcome := reclaim.OutcomeReclaimed
		if i >= 10 {
			outcome = reclaim.OutcomeRestored
		}
		r := reclaim.Record{ID: fmt.Sprintf("r%03d", i), At: start.Add(time.Duration(i) * time.Minute), Outcome: outcome}
		b, _ := json.Marshal(r)
		cm.Data[r.ID] = string(b)
	}
	if err := trimLedger(cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != MaxLedgerRecords {
		t.Fatalf("%d records kept, want %d", len(cm.Data), MaxLedgerRecords)
	}
	for i := range 10 {
		if _, ok := cm.Data[fmt.Sprintf("r%03d", i)]; !ok {
			t.Errorf("open record r%03d dropped before closed ones", i)
		}
	}
	for i := 10; i < 15; i++ {
		if _, ok := cm.Data[fmt.Sprintf("r%03d", i)]; ok {
			t.Errorf("the oldest closed record r%03d kept", i)
		}
	}
	cm.Data["bad"] = "{"
	if _, err := decodeLedger(cm); err == nil {
		t.Errorf("a broken record must be an error that names its key")
	}
}
