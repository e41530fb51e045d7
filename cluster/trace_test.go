package cluster

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpupack/gpupack/gpu"
)

func TestLoadTracePods(t *testing.T) {
	csv := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"a,12000,16384,1,1000,,LS,Running,0,1,0\n" +
		"b,6000,12288,1,460,V100M16|V100M32,LS,Running,0,1,0\n" +
		"c,4000,8192,0,0,nan,BE,Running,0,1,0\n" +
		"d,88000,327680,8,1000,G2,LS,Running,0,1,0\n"
	pods, err := LoadTracePods(strings.NewReader(csv), "pods.csv", gpu.Default())
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Kind: WholeGPUs, Count: 1},
		{Kind: Fraction, Milli: 460},
		{},
		{Kind: WholeGPUs, Count: 8},
	}
	var got []Request
	for _, p := range pods {
		got = append(got, p.GPU)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"V100-16GB", "V100-32GB"}, pods[1].GPUModels); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	if pods[3].CPU != 88000 || pods[3].Memory != 327680 {
		t.Errorf("pod d: cpu %d memory %d", pods[3].CPU, pods[3].Memory)
	}
}

func TestLoadTraceErrors(t *testing.T) {
	podHead := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	nodeHead := "sn,cpu_milli,memory_mib,gpu,model\n"
	cases := map[string]struct {
		nodes bool
		doc   string
		want  string
	}{
		"empty":            {false, "", "x.csv:1: empty file"},
		"header only":      {false, podHead, "no pods"},
		"missing column":   {false, "name,cpu_milli\np,1\n", "missing column \"memory_mib\""},
		"not a number":     {false, podHead + "p,abc,1,0,0,\n", "x.csv:2: column cpu_milli: \"abc\" is not a whole number"},
		"negative":         {false, podHead + "p,-5,1,0,0,\n", "column cpu_milli: -5 is negative"},
		"absurd gpus":      {false, podHead + "p,1,1,500,1000,\n", "column num_gpu: 500 is absurdly large"},
		"milli over 1000":  {false, podHead + "p,1,1,1,1500,\n", "column gpu_milli: 1500 is absurdly large"},
		"milli no gpu":     {false, podHead + "p,1,1,0,300,\n", "set num_gpu to 1"},
		"multi fraction":   {false, podHead + "p,1,1,2,300,\n", "fractions are supported on one GPU only"},
		"unknown model":    {false, podHead + "p,1,1,1,1000,RTX9000\n", "column gpu_spec: unknown GPU model \"RTX9000\""},
		"duplicate pod":    {false, podHead + "p,1,1,0,0,\np,1,1,0,0,\n", "x.csv:3: column name: pod \"p\" already listed on line 2"},
		"bad quoting":      {false, podHead + "p,\"1,1,0,0,\n", "x.csv:"},
		"ragged":           {false, podHead + "p,1,1\n", "x.csv:2"},
		"node no model":    {true, nodeHead + "n,1000,1024,8,\n", "column model: node has 8 GPUs but no model"},
		"node bad model":   {true, nodeHead + "n,1000,1024,8,Z99\n", "unknown GPU model \"Z99\""},
		"node absurd cpu":  {true, nodeHead + "n,999999999999,1024,0,\n", "column cpu_milli"},
		"node duplicate":   {true, nodeHead + "n,1,1,0,\nn,1,1,0,\n", "already listed on line 2"},
		"node header only": {true, nodeHead, "no nodes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.nodes {
				_, err = LoadTraceNodes(strings.NewReader(tc.doc), "x.csv", gpu.Default())
			} else {
				_, err = LoadTracePods(strings.NewReader(tc.doc), "x.csv", gpu.Default())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
			var te *TraceError
			if err != nil && !errors.As(err, &te) {
				t.Errorf("err %T is not a *TraceError", err)
			}
		})
	}
}

// TestLoadTraceErrorsEscapeControlBytes: a value that a trace CSV holds
// reaches an error message quoted, its control bytes escaped, so that a
// hostile file cannot move the cursor, recolour or overwrite the terminal
// that prints the error.
func TestLoadTraceErrorsEscapeControlBytes(t *testing.T) {
	const hostile = "\x1b[2J\rok"
	podHead := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
	nodeHead := "sn,cpu_milli,memory_mib,gpu,model\n"
	quoted := func(cells ...string) string {
		for i, c := range cells {
			cells[i] = `"` + c + `"`
		}
		return strings.Join(cells, ",") + "\n"
	}
	cases := map[string]struct {
		load func(string) error
		doc  string
	}{
		"pod header":    {loadPods, quoted("name", hostile, "cpu_milli")},
		"pod name":      {loadPods, podHead + quoted(hostile, "1", "1", "0", "0", "") + quoted(hostile, "1", "1", "0", "0", "")},
		"pod cpu":       {loadPods, podHead + quoted("p", hostile, "1", "0", "0", "")},
		"pod gpu_spec":  {loadPods, podHead + quoted("p", "1", "1", "1", "1000", hostile)},
		"node header":   {loadNodes, quoted("sn", hostile)},
		"node name":     {loadNodes, nodeHead + quoted(hostile, "1", "1", "0", "") + quoted(hostile, "1", "1", "0", "")},
		"node gpus":     {loadNodes, nodeHead + quoted("n", "1", "1", hostile, "")},
		"node model":    {loadNodes, nodeHead + quoted("n", "1", "1", "8", hostile)},
		"lifetime time": {loadLifetimes, "name,creation_time,deletion_time\n" + quoted("p", hostile, "1")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.load(tc.doc)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if i := strings.IndexFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
				t.Errorf("err = %q: a raw control byte at %d", msg, i)
			}
			if !strings.Contains(msg, strconv.Quote(hostile)) {
				t.Errorf("err = %q, want the value quoted, %s", msg, strconv.Quote(hostile))
			}
		})
	}
}

func loadPods(doc string) error {
	_, err := LoadTracePods(strings.NewReader(doc), "x.csv", gpu.Default())
	return err
}

func loadNodes(doc string) error {
	_, err := LoadTraceNodes(strings.NewReader(doc), "x.csv", gpu.Default())
	return err
}

func loadLifetimes(doc string) error {
	_, err := LoadTraceLifetimes(strings.NewReader(doc), "x.csv")
	return err
}

func FuzzLoadTracePods(f *testing.F) {
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1000,1024,1,500,T4|P100\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,0,0,8,1000\n")
	f.Add("\ufeffname,cpu_milli,memory_mib,num_gpu,gpu_milli\n\"p\",1,1,0,0\n")
	f.Fuzz(func(t *testing.T, doc string) {
		pods, err := LoadTracePods(strings.NewReader(doc), "fuzz.csv", gpu.Default())
		if err != nil {
			return
		}
		for _, p := range pods {
			if p.CPU < 0 || p.Memory < 0 || p.GPU.Milli < 0 || p.GPU.Milli > gpu.WholeGPU || p.GPU.Count < 0 {
				t.Fatalf("accepted impossible pod %+v", p)
			}
		}
	})
}

func FuzzLoadTraceNodes(f *testing.F) {
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nn,64000,262144,8,G2\n")
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,0,\n")
	f.Fuzz(func(t *testing.T, doc string) {
		nodes, err := LoadTraceNodes(strings.NewReader(doc), "fuzz.csv", gpu.Default())
		if err != nil {
			return
		}
		for _, n := range nodes {
			if n.CPU < 0 || n.Memory < 0 || len(n.GPUs) > maxTraceGPUs {
				t.Fatalf("accepted impossible node %+v", n)
			}
			for _, g := range n.GPUs {
				if g.Model == nil {
					t.Fatalf("GPU without a model on %s", n.Name)
				}
			}
		}
	})
}
