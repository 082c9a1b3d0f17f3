// Parse a Chrome trace with the DevTools trace engine (npm `@paulirish/trace_engine`) and
// print what it made of it, as JSON: per thread its name and slices (name, ts and dur in
// microseconds, depth and parent's index in the engine's own tree).
//
// node trace_engine.mjs TRACE.json NODE_MODULES_DIR
import fs from 'node:fs';
import path from 'node:path';
import url from 'node:url';

const [trace, modules] = process.argv.slice(2);
const engineDir = path.join(modules, '@paulirish', 'trace_engine');
// Importing the package's own CLI module installs its DOMRect polyfill, which Node lacks.
const {analyzeEvents} = await import(url.pathToFileURL(path.join(engineDir, 'analyze-trace.mjs')).href);

const json = JSON.parse(fs.readFileSync(trace, 'utf8'));
const {parsedTrace} = await analyzeEvents(json.traceEvents);
const renderer = parsedTrace.data.Renderer;
const out = [];
for (const [pid, proc] of renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    const index = new Map(thread.entries.map((e, i) => [e, i]));
    const slices = thread.entries.map(e => {
      const node = renderer.entryToNode.get(e);
      const parent = node?.parent ? index.get(node.parent.entry) : null;
      return {name: e.name, ph: e.ph, ts: e.ts, dur: e.dur, depth: node?.depth ?? null, parent: parent ?? null};
    });
    out.push({pid, tid, name: thread.name, slices});
  }
}
process.stdout.write(JSON.stringify(out));
