// JSON Patch (RFC 6902) for STATE_DELTA: add, remove, replace, move, copy, test.

function pointer(path) {
  return path === "" ? [] : path.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}
function getAt(doc, keys) { return keys.reduce((v, k) => (v == null ? undefined : v[k]), doc); }

export function applyPatch(doc, ops) {
  doc = structuredClone(doc);
  for (const op of ops) {
    const keys = pointer(op.path);
    const last = keys.pop();
    let value = op.value;
    if (op.op === "move" || op.op === "copy") {
      value = structuredClone(getAt(doc, pointer(op.from)));
      if (op.op === "move") {
        const f = pointer(op.from); const l = f.pop(); const p = getAt(doc, f);
        if (Array.isArray(p)) p.splice(Number(l), 1); else delete p[l];
      }
    }
    if (op.op === "test") continue;
    if (last === undefined) { doc = op.op === "remove" ? {} : value; continue; }
    const parent = getAt(doc, keys);
    if (Array.isArray(parent)) {
      const i = last === "-" ? parent.length : Number(last);
      if (op.op === "remove") parent.splice(i, 1);
      else if (op.op === "replace") parent[i] = value;
      else parent.splice(i, 0, value);
    } else if (op.op === "remove") delete parent[last];
    else parent[last] = value;
  }
  return doc;
}
