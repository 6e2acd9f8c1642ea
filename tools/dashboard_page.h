// The page of `canopy run --dashboard`: plain HTML, CSS and script, no library and
// nothing fetched from elsewhere (clusters' front-end nodes are often offline). It
// polls /view.html twice a second, the view run_page.h renders (the tree drawn, the
// progress and check, the rates plotted, the events in sentences), and swaps in each
// <section> that changed, so that a hover title or an opened "details" survives the
// polls that did not change it. When the front-end stops answering (the run is
// over) the page keeps the last view it had, and says so.
#pragma once

#include <string>

#include "run_page.h"

namespace canopy::tools {

inline std::string dashboard_page() {
  return std::string(R"PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Canopy: live tree</title>
<style>)PAGE") + kRunPageStyle +
         R"PAGE(</style>
</head>
<body>
<h1>Canopy: live tree</h1>
<p id="banner"></p>
<div id="view"><section id="run"><p>Waiting for the front-end...</p></section></div>
<script>
"use strict";
const shown = new Map();  // section id -> the HTML it was drawn from
function swap(fresh) {
  const old = document.getElementById(fresh.id);
  if (shown.get(fresh.id) === fresh.outerHTML && old) return;
  shown.set(fresh.id, fresh.outerHTML);
  // The events whose details the reader opened stay open.
  const open = new Set(old ? Array.from(old.querySelectorAll("li[id] > details[open]"), d => d.parentNode.id) : []);
  for (const id of open) {
    const li = fresh.querySelector("#" + CSS.escape(id));
    if (li && li.querySelector("details")) li.querySelector("details").open = true;
  }
  if (old) old.replaceWith(fresh); else document.getElementById("view").appendChild(fresh);
}
async function poll() {
  try {
    const r = await fetch("/view.html", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const template = document.createElement("template");
    template.innerHTML = await r.text();
    for (const section of Array.from(template.content.children)) if (section.id) swap(section);
    document.getElementById("banner").textContent = "";
    document.body.dataset.updated = Date.now();
  } catch (e) {
    document.getElementById("banner").textContent =
        "The front-end does not answer: the run is over (or its host is unreachable). This is the last state it "
        + "showed; canopy run --report FILE keeps one that outlives the run.";
  }
}
poll();
setInterval(poll, 500);
</script>
</body>
</html>
)PAGE";
}

}  // namespace canopy::tools
