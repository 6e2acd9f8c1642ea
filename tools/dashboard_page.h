// The page of `canopy run --dashboard`: plain HTML, CSS and script, no library and
// nothing fetched from elsewhere (clusters' front-end nodes are often offline). It
// polls /state.json twice a second and redraws: the live tree (each node with its
// state, incarnation and link), the nodes lost, the streams' rates, the events.
// Each node's element carries data-rank, data-role, data-state, data-parent and
// data-incarnation, which the test reads from the page as Chromium renders it.
#pragma once

namespace canopy::tools {

inline constexpr const char* kDashboardPage = R"PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Canopy: live tree</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; }
  h2 { font-size: 1.05em; margin: 1.2em 0 .4em; }
  #run { color: #555; }
  #run.stale, #run.gone { color: #b00; font-weight: bold; }
  ul.tree, ul.tree ul { list-style: none; padding-left: 1.4em; margin: 0; border-left: 1px dotted #bbb; }
  ul.tree { padding-left: 0; border: none; }
  li.node { margin: 2px 0; }
  .badge { display: inline-block; padding: 0 .45em; border-radius: .6em; font-size: .85em; margin-left: .35em; }
  .alive > .label .state { background: #d7f5dc; color: #14602a; }
  .lost > .label .state { background: #fbd5d5; color: #8a1010; }
  .lost > .label .name { text-decoration: line-through; color: #8a1010; }
  .adopted { background: #ffe9c2; color: #7a4a00; }
  .link { color: #666; font-size: .85em; margin-left: .5em; }
  .role-frontend > .label .name { font-weight: bold; }
  table { border-collapse: collapse; }
  td, th { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: right; }
  th:first-child, td:first-child { text-align: left; }
  #events li { font-family: ui-monospace, monospace; font-size: .9em; }
  #error { color: #b00; }
</style>
</head>
<body>
<h1>Canopy: live tree</h1>
<div id="run">waiting for the front-end...</div>
<div id="summary"></div>
<div id="error"></div>
<h2>Tree</h2>
<ul class="tree" id="tree"></ul>
<h2>Lost</h2>
<ul class="tree" id="lost"><li>none</li></ul>
<h2>Streams at the front-end</h2>
<table id="streams"><thead><tr><th>stream</th><th>packets</th><th>per second</th></tr></thead><tbody></tbody></table>
<h2>Events (latest first)</h2>
<ul id="events"></ul>
<script>
"use strict";
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function roleName(role) { return role === "frontend" ? "front-end" : role === "backend" ? "back-end" : role; }
function nodeItem(n, byRank, drawn) {
  drawn.add(n.rank);
  const li = el("li", "node " + n.state + " role-" + n.role);
  li.dataset.rank = n.rank;
  li.dataset.role = n.role;
  li.dataset.state = n.state;
  li.dataset.parent = n.parent === null ? "" : n.parent;
  li.dataset.incarnation = n.incarnation;
  const label = el("span", "label");
  label.appendChild(el("span", "name", roleName(n.role) + " " + n.rank + " on " + n.host));
  label.appendChild(el("span", "badge state", n.state));
  if (n.incarnation > 0) label.appendChild(el("span", "badge adopted", "adopted, incarnation " + n.incarnation));
  if (n.role === "backend" && n.member === false) label.appendChild(el("span", "badge", "not in the view (epoch " + n.epoch + ")"));
  if (n.late_packets) label.appendChild(el("span", "badge", n.late_packets + " late packet(s) dropped"));
  if (n.link) label.appendChild(el("span", "link", n.link + " link" + (n.nics ? ", NICs " + n.nics : "")));
  li.appendChild(label);
  const kids = (n.children || []).map(r => byRank.get(r)).filter(c => c && !drawn.has(c.rank));
  if (kids.length) {
    const ul = el("ul");
    for (const c of kids) ul.appendChild(nodeItem(c, byRank, drawn));
    li.appendChild(ul);
  }
  return li;
}
function draw(s) {
  const run = document.getElementById("run");
  run.className = s.run || "";
  run.textContent = "run: " + (s.run || "?") + (s.pid ? " (pid " + s.pid + " on " + s.host + ")" : "") +
      (s.run === "finished" ? ", exit status " + s.exit_status : "");
  const nodes = s.nodes || [];
  const byRank = new Map(nodes.map(n => [n.rank, n]));
  const alive = nodes.filter(n => n.state === "alive").length;
  document.getElementById("summary").textContent = alive + " alive, " + (nodes.length - alive) + " lost" +
      (s.view ? "; membership view " + s.view.id + ": " + s.view.members + " members" : "");
  const tree = document.getElementById("tree"), lost = document.getElementById("lost");
  tree.replaceChildren();
  lost.replaceChildren();
  const drawn = new Set();
  const root = nodes.find(n => n.parent === null && n.role === "frontend") || nodes[0];
  if (root) tree.appendChild(nodeItem(root, byRank, drawn));
  for (const n of nodes) if (!drawn.has(n.rank) && n.state === "lost") lost.appendChild(nodeItem(n, byRank, drawn));
  if (!lost.children.length) lost.appendChild(el("li", "", "none"));
  const body = document.querySelector("#streams tbody");
  body.replaceChildren();
  for (const st of s.streams || []) {
    const tr = el("tr");
    tr.dataset.stream = st.id;
    tr.appendChild(el("td", "", st.id));
    tr.appendChild(el("td", "", st.packets));
    tr.appendChild(el("td", "", st.per_second.toFixed(1)));
    body.appendChild(tr);
  }
  const events = document.getElementById("events");
  events.replaceChildren();
  for (const e of (s.events || []).slice().reverse()) events.appendChild(el("li", "", e));
  document.body.dataset.updated = s.time_ms || "";
}
async function poll() {
  try {
    const r = await fetch("/state.json", {cache: "no-store"});
    draw(await r.json());
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "the front-end does not answer (the run is over?)";
  }
}
poll();
setInterval(poll, 500);
</script>
</body>
</html>
)PAGE";

}  // namespace canopy::tools
