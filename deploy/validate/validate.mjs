// Schema-checks every object in deploy/*.yaml: core and apps objects against the Kubernetes
// schemas (kubernetes-models), ServiceMonitor against the Prometheus operator's CRD schema,
// HTTPRoute against the Gateway API's. InferencePool (Gateway API Inference Extension) has no
// published model package: it is checked for the fields the extension requires.
// Usage: node validate.mjs DIR   (exit 1 with the reasons on any violation)
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1";
import { Service, PersistentVolumeClaim } from "kubernetes-models/v1";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { HTTPRoute } from "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1";

const models = {
  "apps/v1/Deployment": Deployment,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
  "gateway.networking.k8s.io/v1/HTTPRoute": HTTPRoute,
};

function checkInferencePool(o) {
  const s = o.spec ?? {};
  const missing = [];
  if (!o.metadata?.name) missing.push("metadata.name");
  if (!s.selector?.matchLabels) missing.push("spec.selector.matchLabels");
  if (!Array.isArray(s.targetPorts) || s.targetPorts.length === 0 || !s.targetPorts.every((p) => Number.isInteger(p.number))) missing.push("spec.targetPorts[].number");
  if (!s.endpointPickerRef?.name) missing.push("spec.endpointPickerRef.name");
  if (missing.length) throw new Error("InferencePool lacks " + missing.join(", "));
}

const dir = process.argv[2];
let checked = 0, failed = 0;
for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
  for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
    const o = doc.toJS();
    if (!o) continue;
    const key = `${o.apiVersion}/${o.kind}`;
    try {
      if (key === "inference.networking.k8s.io/v1/InferencePool") checkInferencePool(o);
      else if (models[key]) new models[key](o).validate();
      else throw new Error(`no schema known for ${key}`);
      checked++;
    } catch (e) {
      failed++;
      console.error(`${file}: ${o.kind} ${o.metadata?.name}: ${e.message}`);
    }
  }
}
console.log(JSON.stringify({ checked, failed }));
process.exit(failed ? 1 : 0);
