package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadTraceLifetimes(t *testing.T) {
	csv := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n" +
		"a,1000,1024,1,1000,10,100,40\n" +
		"b,1000,1024,1,1000,20,50,\n"
	got, err := LoadTraceLifetimes(strings.NewReader(csv), "pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceLifetime{{CreatedSeconds: 10, ScheduledSeconds: 40, DeletedSeconds: 100}, {CreatedSeconds: 20, ScheduledSeconds: -1, DeletedSeconds: 50}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lifetimes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{60, 30}, []int64{got[0].RunSeconds(), got[1].RunSeconds()}); diff != "" {
		t.Errorf("run seconds (-want +got):\n%s", diff)
	}
}

func TestLoadTraceLifetimesErrors(t *testing.T) {
	header := "name,creation_time,deletion_time,scheduled_time\n"
	cases := map[string]struct{ csv, want string }{
		"no deletion column":     {"name,creation_time\na,1\n", `missing column "deletion_time"`},
		"empty deletion":         {header + "a,1,,1\n", "pods.csv:2: column deletion_time: empty"},
		"deleted before created": {header + "a,5,3,\n", "pods.csv:2: column deletion_time: 3 is before creation_time 5"},
		"scheduled after delete": {header + "a,1,3,9\n", "pods.csv:2: column scheduled_time: 9 is outside the pod's life"},
		"not a number":           {header + "a,x,3,\n", `pods.csv:2: column creation_time: "x" is not a whole number`},
		"header only":            {header, "no pods"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := LoadTraceLifetimes(strings.NewReader(tc.csv), "pods.csv")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
