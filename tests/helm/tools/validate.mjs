// validate.mjs — checks every rendered manifest against the Kubernetes OpenAPI schemas
// (kubernetes-models; prometheus-operator's for ServiceMonitor). Input: the JSON list that
// tests/helm/render prints ([{source, object}]). An object of a kind with no model fails:
// the chart must not emit what nothing checks. Exit 0 when all pass, 1 with one line each.
//
// The schemas do not forbid unknown fields (the API server drops or, with strict field
// validation, refuses them), so a typo such as `readinesProbe` would pass. The compiled
// validator reads every field its schema knows and enumerates free-form maps: running it
// on a proxy that records those reads, a field it never touched is unknown.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);

function tracked(value, path, seen) {
  if (value === null || typeof value !== "object") return value;
  const record = { read: new Set(), enumerated: false, keys: Array.isArray(value) ? [] : Object.keys(value) };
  seen.set(path, record);
  const copy = Array.isArray(value)
    ? value.map((v, i) => tracked(v, `${path}/${i}`, seen))
    : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, tracked(v, `${path}/${k}`, seen)]));
  return new Proxy(copy, {
    get(t, k, r) {
      if (typeof k === "string") record.read.add(k);
      return Reflect.get(t, k, r);
    },
    has(t, k) {
      if (typeof k === "string") record.read.add(k);
      return Reflect.has(t, k);
    },
    ownKeys(t) {
      record.enumerated = true;
      return Reflect.ownKeys(t);
    },
  });
}

// The compiled schema validator a model registers (its module imports it from _schemas/).
async function schemaValidator(modulePath) {
  const file = require.resolve(modulePath).replace(/\.js$/, ".mjs");
  const m = readFileSync(file, "utf8").match(/from"((?:\.\.\/)+_schemas\/[A-Za-z0-9]+\.mjs)"/);
  if (!m) return null;
  return (await import(pathToFileURL(join(dirname(file), m[1])).href)).validate;
}

function unknownFields(validate, object) {
  const seen = new Map();
  validate(tracked(object, "", seen));
  const unknown = [];
  for (const [path, r] of seen)
    if (!r.enumerated) for (const k of r.keys) if (!r.read.has(k)) unknown.push(`${path}/${k}`);
  // Only the outermost: the fields under an unknown one are unknown too.
  return unknown.filter((u) => !unknown.some((o) => u.startsWith(o + "/")));
}

const file = process.argv[2];
if (!file) {
  console.error("usage: node validate.mjs manifests.json");
  process.exit(2);
}
const manifests = JSON.parse(readFileSync(file, "utf8"));
const failures = [];
const bad = new Set(); // objects with at least one failure
function fail(name, why) {
  bad.add(name);
  failures.push(`${name}: ${why}`);
}
for (const { source, object } of manifests) {
  const { apiVersion, kind } = object;
  const name = `${kind}/${object.metadata?.name} (${source})`;
  const modulePath = apiVersion.startsWith("monitoring.coreos.com/")
    ? `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`
    : `kubernetes-models/${apiVersion}/${kind}`;
  let Model;
  try {
    Model = (await import(modulePath))[kind];
  } catch (e) {
    fail(name, `no schema for ${apiVersion} ${kind}`);
    continue;
  }
  try {
    new Model(object).validate();
  } catch (e) {
    const details = (e.errors ?? []).map((x) => `${x.instancePath} ${x.message}`).join("; ");
    fail(name, details || e.message);
  }
  const validate = await schemaValidator(modulePath);
  if (!validate) {
    fail(name, `cannot find the schema validator of ${modulePath}`);
    continue;
  }
  const unknown = unknownFields(validate, object);
  if (unknown.length) fail(name, `unknown fields ${unknown.join(", ")}`);
}
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${manifests.length - bad.size}/${manifests.length} objects valid`);
process.exit(failures.length ? 1 : 0);
