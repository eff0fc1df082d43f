// helm-render: a test-only renderer for helm/rtcedge, for machines without a helm binary.
// It implements the subset of Helm the chart keeps to: values.yaml merged with -f files
// (later wins, maps merge, null deletes), values.schema.json validation of the merged
// values (gojsonschema, as Helm 3 did), .Values/.Release/.Chart/.Files.Get, the sprig
// functions plus include, tpl, required, toYaml, fromYaml and toJson, and Helm's output
// ("# Source:" documents). It prints JSON (one object per manifest) so that the checks need
// no YAML parser; `helm-render yaml2json FILE...` converts helm template output the same way.
// Built offline from Debian's golang-go, golang-github-masterminds-sprig-dev,
// golang-github-xeipuuv-gojsonschema-dev and golang-gopkg-yaml.v3-dev (GO111MODULE=off).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/xeipuuv/gojsonschema"
	"gopkg.in/yaml.v3"
)

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

// Manifest is one rendered document: the template it came from and the object.
type Manifest struct {
	Source string                 `json:"source"`
	Object map[string]interface{} `json:"object"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "yaml2json" {
		var out []Manifest
		for _, f := range os.Args[2:] {
			data, err := os.ReadFile(f)
			check(err)
			docs, err := splitDocuments(string(data), "")
			check(err)
			out = append(out, docs...)
		}
		emit(out)
		return
	}
	var files valueFiles
	chartDir := flag.String("chart", "", "chart directory")
	name := flag.String("name", "rtcedge", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	showValues := flag.Bool("values", false, "print the merged values (JSON) instead of manifests")
	flag.Var(&files, "f", "values file (repeatable; later files win)")
	flag.Parse()
	if *chartDir == "" {
		fail("usage: helm-render -chart DIR [-f values.yaml]... [-name N] [-namespace NS]")
	}
	chart := map[string]interface{}{}
	check(readYAML(filepath.Join(*chartDir, "Chart.yaml"), &chart))
	values := map[string]interface{}{}
	check(readYAML(filepath.Join(*chartDir, "values.yaml"), &values))
	for _, f := range files {
		override := map[string]interface{}{}
		check(readYAML(f, &override))
		values = merge(values, override)
	}
	chartName, _ := chart["name"].(string)
	if err := validate(*chartDir, chartName, values); err != nil {
		fail(err.Error())
	}
	if *showValues {
		check(json.NewEncoder(os.Stdout).Encode(values))
		return
	}
	manifests, err := render(*chartDir, chart, values, *name, *namespace)
	if err != nil {
		fail(err.Error())
	}
	emit(manifests)
}

func emit(m []Manifest) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	check(enc.Encode(m))
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "Error: "+msg)
	os.Exit(1)
}

func readYAML(path string, into *map[string]interface{}) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if *into == nil {
		*into = map[string]interface{}{}
	}
	return nil
}

// merge is Helm's coalescing of a user file onto the defaults: maps merge key by key, any
// other value replaces, and an explicit null removes the default.
func merge(base, over map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]interface{})
		om, ook := v.(map[string]interface{})
		if bok && ook {
			out[k] = merge(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

// validate checks the merged values against values.schema.json and words the failure as
// Helm does: "values don't meet the specifications of the schema(s) ...", one "- field: why"
// line per error, so that a test and an operator read the same message either way.
func validate(chartDir, chartName string, values map[string]interface{}) error {
	schemaPath := filepath.Join(chartDir, "values.schema.json")
	schema, err := os.ReadFile(schemaPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	doc, err := json.Marshal(values)
	if err != nil {
		return err
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("%s: %v", schemaPath, err)
	}
	if result.Valid() {
		return nil
	}
	var lines []string
	for _, e := range result.Errors() {
		lines = append(lines, fmt.Sprintf("- %s: %s", e.Field(), e.Description()))
	}
	sort.Strings(lines)
	return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s",
		chartName, strings.Join(lines, "\n"))
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func render(chartDir string, chart, values map[string]interface{}, name, namespace string) ([]Manifest, error) {
	tdir := filepath.Join(chartDir, "templates")
	var paths []string
	err := filepath.Walk(tdir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".tpl") ||
			strings.HasSuffix(p, ".txt")) {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	root := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["toJson"] = func(v interface{}) string { b, _ := json.Marshal(v); return string(b) }
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	funcs["include"] = func(string, interface{}) (string, error) { return "", nil }
	funcs["tpl"] = func(string, interface{}) (string, error) { return "", nil }
	root.Funcs(funcs)
	// include and tpl need the parsed template set, so they are bound after parsing.
	funcs["include"] = func(n string, data interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, n, data)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, data)
		return buf.String(), err
	}
	root.Funcs(funcs)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(chartDir, p)
		if _, err := root.New(filepath.Join(chart["name"].(string), rel)).Parse(string(data)); err != nil {
			return nil, err
		}
	}
	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": name, "Namespace": namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false,
			"Revision": 1,
		},
		"Chart":    chartObject(chart),
		"Files":    files{dir: chartDir},
		"Template": map[string]interface{}{"BasePath": filepath.Join(chart["name"].(string), "templates")},
	}
	var out []Manifest
	for _, p := range paths {
		base := filepath.Base(p)
		rel, _ := filepath.Rel(chartDir, p)
		tname := filepath.Join(chart["name"].(string), rel)
		if base == "NOTES.txt" {
			// Helm prints it after an install: it must execute, its text is not a manifest.
			if err := root.ExecuteTemplate(&bytes.Buffer{}, tname, top); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(base, "_") || !strings.HasSuffix(base, ".yaml") {
			continue
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, top); err != nil {
			return nil, err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		docs, err := splitDocuments(text, tname)
		if err != nil {
			return nil, fmt.Errorf("%s: rendered YAML does not parse: %v\n%s", tname, err, text)
		}
		out = append(out, docs...)
	}
	return out, nil
}

// chartObject gives Chart.yaml's fields Helm's capitalised names (.Chart.Name, .Chart.Version).
func chartObject(chart map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range chart {
		out[strings.ToUpper(k[:1])+k[1:]] = v
	}
	return out
}

type files struct{ dir string }

// Get reads a chart file, as Helm's .Files.Get; a missing file renders empty, as there.
func (f files) Get(name string) string {
	data, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		return ""
	}
	return string(data)
}

func splitDocuments(text, source string) ([]Manifest, error) {
	var out []Manifest
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var obj map[string]interface{}
		err := dec.Decode(&obj)
		if errors.Is(err, os.ErrClosed) || (err != nil && err.Error() == "EOF") {
			break
		}
		if err != nil {
			return nil, err
		}
		if obj == nil {
			continue
		}
		out = append(out, Manifest{Source: source, Object: obj})
	}
	return out, nil
}
