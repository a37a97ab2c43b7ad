// Validates Kubernetes objects with the published object models: kubernetes-models (the core
// API: v1, apps/v1, policy/v1 ...), @kubernetes-models/keda (ScaledObject, TriggerAuthentication)
// and @kubernetes-models/prometheus-operator (ServiceMonitor, PrometheusRule).
//
//   node validate_models.mjs MODELS_DIR < objects.json      (MODELS_DIR: scripts/kube-models)
//
// objects.json is a JSON list of objects; the output is a JSON list with, per object in the same
// order, {"kind", "name", "errors": [...]} ([] when valid). Two checks:
// 1. the model's own validation (types, enums, required fields, formats), which throws;
// 2. unknown fields: the models accept any extra field, but the API server's strict field
//    validation (kubectl's default) refuses one, and a misspelt field in a template is silently
//    dropped otherwise. The field names come from the models' TypeScript declarations (one
//    interface per API type, in every package), walked through nested objects and lists.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const modelsDir = path.join(process.argv[2], "node_modules");

// apiVersion group -> the package folder holding its models (the core API's groups are folders
// of kubernetes-models; "v1" is the core group).
const CRD_PACKAGES = {
  "keda.sh": "@kubernetes-models/keda/keda.sh",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator/monitoring.coreos.com",
};

function modelFolder(apiVersion) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  return path.join(modelsDir, CRD_PACKAGES[group] ?? path.join("kubernetes-models", group), version);
}

// --- unknown fields, from the declarations -------------------------------------------------
const declarations = new Map(); // .d.ts path -> {fields: Map(name -> type text), imports: Map(name -> path)}

function parseDeclaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  let parsed = null;
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, "utf8");
    const imports = new Map();
    for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
      const target = m[2].startsWith(".")
        ? path.resolve(path.dirname(file), m[2].replace(/\.js$/, ".d.ts"))
        : path.join(modelsDir, m[2] + ".d.ts");
      imports.set(m[1], target);
    }
    const start = text.search(/^export interface \w+ (extends [\w, ]+ )?\{$/m);
    if (start >= 0) {
      const fields = new Map();
      let depth = 0;
      for (const line of text.slice(start).split("\n")) {
        const opens = (line.match(/\{/g) || []).length, closes = (line.match(/\}/g) || []).length;
        if (depth === 1) {
          const m = line.match(/^\s*"([^"]+)"\??: (.*?);?$/);
          if (m) fields.set(m[1], m[2]);
        }
        depth += opens - closes;
        if (depth === 0 && opens + closes > 0) break;
      }
      parsed = { fields, imports };
    } else {
      // A type that is another one under a new name (KEDA's AuthSecretTargetRef = AuthTargetRef).
      const alias = text.match(/^export type \w+ = (\w+);$/m);
      if (alias && imports.has(alias[1])) parsed = parseDeclaration(imports.get(alias[1]));
    }
  }
  declarations.set(file, parsed);
  return parsed;
}

function unknownFields(value, file, where, errors) {
  const declaration = parseDeclaration(file);
  if (!declaration || value === null || typeof value !== "object" || Array.isArray(value)) return;
  for (const [name, item] of Object.entries(value)) {
    if (!declaration.fields.has(name)) {
      errors.push(`${where}/${name}: unknown field`);
      continue;
    }
    // The field's type: an interface of the models (walked), a list of one, or anything else
    // (a scalar, a map, an alias such as IntOrString: not walked).
    const type = declaration.fields.get(name);
    const list = type.match(/^Array<(\w+)>$/);
    const target = declaration.imports.get(list ? list[1] : type);
    if (!target) continue;
    if (list && Array.isArray(item)) item.forEach((x, i) => unknownFields(x, target, `${where}/${name}/${i}`, errors));
    else if (!list) unknownFields(item, target, `${where}/${name}`, errors);
  }
}

// --- main ------------------------------------------------------------------------------------
const objects = JSON.parse(fs.readFileSync(0, "utf8"));
const results = [];
for (const object of objects) {
  const errors = [];
  const { apiVersion = "", kind = "" } = object;
  const folder = modelFolder(apiVersion);
  const file = path.join(folder, `${kind}.js`);
  if (!kind || !fs.existsSync(file)) {
    errors.push(`no model for ${apiVersion} ${kind}`);
  } else {
    const Model = (await import(pathToFileURL(file).href))[kind];
    try {
      new Model(object).validate();
    } catch (error) {
      errors.push(String(error.message || error));
    }
    unknownFields(object, path.join(folder, `${kind}.d.ts`), "", errors);
  }
  results.push({ kind, name: object?.metadata?.name ?? "", errors });
}
process.stdout.write(JSON.stringify(results));
