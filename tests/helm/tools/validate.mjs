// validate.mjs — checks every rendered manifest against the Kubernetes OpenAPI schemas
// (kubernetes-models; prometheus-operator's for ServiceMonitor). Input: the JSON list that
// tests/helm/render prints ([{source, object}]). An object of a kind with no model fails:
// the chart must not emit what nothing checks. Exit 0 when all pass, 1 with one line each.
import { readFileSync } from "node:fs";

const file = process.argv[2];
if (!file) {
  console.error("usage: node validate.mjs manifests.json");
  process.exit(2);
}
const manifests = JSON.parse(readFileSync(file, "utf8"));
const failures = [];
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
    failures.push(`${name}: no schema for ${apiVersion} ${kind}`);
    continue;
  }
  try {
    new Model(object).validate();
  } catch (e) {
    const details = (e.errors ?? []).map((x) => `${x.instancePath} ${x.message}`).join("; ");
    failures.push(`${name}: ${details || e.message}`);
  }
}
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${manifests.length - failures.length}/${manifests.length} objects valid`);
process.exit(failures.length ? 1 : 0);
