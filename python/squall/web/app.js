// SPDX-License-Identifier: BSD-3-Clause
// Squall dashboard: one summary per poll arrives over server-sent events
// (/api/stream); the NF table asks /api/nfs for one page, filtered and sorted
// on the server, so 10,000 NFs cost the page one page of rows. A service in
// the topology opens, on a click, its instances: one page of them, from
// /api/nfs too.
"use strict";

const $ = (sel) => document.querySelector(sel);
const WINDOW_S = 300; // the rates chart: the last 5 minutes of wall-clock time
// ?snapshot=1: one fetch of /api/summary, rendered once, no stream: for a
// screenshot (chromium --headless --virtual-time-budget waits for the
// network to go quiet, which a stream never does).
const SNAPSHOT = new URLSearchParams(location.search).get("snapshot") === "1";
const STATES = ["awake", "blocked", "waking", "asleep", "spawned", "exited", "dead", "free"];

function fmt(v, digits = 0) {
	if (v === undefined || v === null || Number.isNaN(v)) return "-";
	const a = Math.abs(v);
	if (a >= 1e9) return (v / 1e9).toFixed(2) + " G";
	if (a >= 1e6) return (v / 1e6).toFixed(2) + " M";
	if (a >= 1e4) return (v / 1e3).toFixed(1) + " k";
	return v.toFixed(digits);
}
const int = (v) => (v === undefined ? "-" : Math.round(v).toLocaleString("en-US"));

function el(tag, attrs = {}, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs)) {
		if (k === "class") e.className = v;
		else if (k === "text") e.textContent = v;
		else e.setAttribute(k, v);
	}
	for (const kid of kids) e.append(kid);
	return e;
}

function setValue(id, v, text) {
	const e = document.getElementById(id);
	e.dataset.value = String(v);
	e.textContent = text;
}

function stateChips(states) {
	const span = el("span", { class: "states" });
	for (const s of STATES) {
		if (states[s]) {
			span.append(el("span", { class: "state state-" + s, "data-state": s, "data-count": states[s], text: `${states[s]} ${s}` }));
		}
	}
	for (const [s, n] of Object.entries(states)) {
		if (!STATES.includes(s)) span.append(el("span", { class: "state", "data-state": s, "data-count": n, text: `${n} ${s}` }));
	}
	return span;
}

// ---------------------------------------------------------------- topology

function node(kind, name, rate, extra) {
	const n = el("div", { class: "node " + kind, "data-kind": kind, "data-name": name },
		el("div", { class: "kind", text: kind }),
		el("div", { class: "name", text: name }));
	if (rate !== undefined) n.append(el("div", { class: "rate", text: rate }));
	if (extra) n.append(extra);
	return n;
}
const arrow = () => el("span", { class: "arrow", text: "\u2192" });

// Services opened in the topology: name -> the page of instances shown.
const opened = new Map();
const INSTANCES_PER_PAGE = 40;

async function renderInstances(box, svc) {
	const page = opened.get(svc) || 0;
	const q = new URLSearchParams({ service: svc, sort: "name", page, per_page: INSTANCES_PER_PAGE });
	const r = await (await fetch("/api/nfs?" + q)).json();
	const pages = Math.max(1, Math.ceil(r.total / INSTANCES_PER_PAGE));
	const list = el("div", { class: "instances", "data-service": svc, "data-total": String(r.total) },
		el("span", { class: "muted", text: `${svc}: ${int(r.total)} instance${r.total === 1 ? "" : "s"}` }));
	for (const n of r.rows) {
		list.append(el("span", {
			class: "inst state-" + n.state + (n.ring_full ? " ring-full" : ""),
			"data-nf": n.name, "data-state": n.state, "data-pid": String(n.pid),
			title: `pid ${n.pid}, ${fmt(n.rx_pps)} pkt/s` + (n.ring_full ? ", ring full" : ""),
			text: `#${n.instance} ${n.state}`,
		}));
	}
	if (pages > 1) {
		const prev = el("button", { class: "inst-prev", text: "\u2190" });
		const next = el("button", { class: "inst-next", text: "\u2192" });
		prev.addEventListener("click", (e) => { e.stopPropagation(); opened.set(svc, Math.max(0, page - 1)); last && renderTopology(last); });
		next.addEventListener("click", (e) => { e.stopPropagation(); opened.set(svc, Math.min(pages - 1, page + 1)); last && renderTopology(last); });
		list.append(prev, el("span", { class: "muted inst-page", text: ` page ${page + 1} of ${pages} ` }), next);
	}
	box.querySelector(`.instances[data-service="${CSS.escape(svc)}"]`)?.remove();
	box.append(list);
}

function renderTopology(s) {
	const ports = Object.fromEntries(s.ports.map((p) => [p.name, p]));
	const chains = Object.fromEntries(s.chains.map((c) => [c.name, c]));
	const services = Object.fromEntries(s.services.map((v) => [v.name, v]));
	const box = $("#topology");
	box.replaceChildren();
	const rules = s.rules.length ? s.rules : s.chains.map((c) => ({ id: "", chain: c.name, in_port: "", out_port: "" }));
	for (const r of rules) {
		const row = el("div", { class: "flow", "data-rule": String(r.id) });
		const inp = ports[r.in_port];
		row.append(node("port", r.in_port || "any", inp ? `rx ${fmt(inp.rx_pps)} pkt/s` : ""));
		row.append(arrow());
		row.append(node("rule", r.id === "" ? "-" : "r" + r.id, r.dst_mac ? "dst " + r.dst_mac : "any MAC",
			el("div", { class: "rate muted", text: r.assign || "" })));
		row.append(arrow());
		// This rule's direction: its own rates when the exporter could tell
		// them apart (its ports carry no other rule), else the chain's totals.
		const ch = chains[r.chain];
		const own = r.rx_pps != null || r.tx_pps != null;
		const cn = node("chain", r.chain, !ch ? "" : own
			? `rx ${fmt(r.rx_pps)}, tx ${fmt(r.tx_pps)} pkt/s` : `tx ${fmt(ch.tx_pps)} pkt/s, all rules`);
		if (ch) {
			cn.dataset.rxPps = String(own ? r.rx_pps : ch.rx_pps);
			cn.dataset.txPps = String(own ? r.tx_pps : ch.tx_pps);
		}
		row.append(cn);
		for (const [hop, svc] of (ch ? ch.hops : []).entries()) {
			row.append(arrow());
			const v = services[svc] || { states: {}, nfs: 0, rx_pps: 0 };
			const mine = r.hop_rx_pps?.[hop];
			const rx = mine ?? v.rx_pps;
			const sn = node("service", svc, `hop ${hop}: ${v.nfs} NF${v.nfs === 1 ? "" : "s"}, rx ${fmt(rx)} pkt/s${mine == null ? ", all rules" : ""}`, stateChips(v.states));
			sn.dataset.rxPps = String(rx);
			sn.dataset.hop = String(hop);
			sn.dataset.open = opened.has(svc) ? "1" : "0";
			sn.title = "click: its instances";
			sn.addEventListener("click", () => {
				if (opened.has(svc)) opened.delete(svc);
				else opened.set(svc, 0);
				renderTopology(last);
			});
			row.append(sn);
		}
		if (r.out_port) {
			row.append(arrow());
			const outp = ports[r.out_port];
			row.append(node("port", r.out_port, outp ? `tx ${fmt(outp.tx_pps)} pkt/s` : ""));
		}
		box.append(row);
	}
	for (const svc of opened.keys()) {
		if (services[svc]) renderInstances(box, svc);
		else opened.delete(svc);
	}
}

// ------------------------------------------------------------------ charts

const rateData = [[], [], [], []];
let rateChart = null;

function chartWidth(elem) {
	return Math.max(300, elem.clientWidth - 8);
}

// Tick labels of the time axis: the local time of day (seconds when the ticks
// are less than a minute apart), the first with its date.
function clockLabels(u, splits, axis, space, incr) {
	const opts = { hour: "2-digit", minute: "2-digit", second: incr < 60 ? "2-digit" : undefined, hourCycle: "h23" };
	return splits.map((t, i) => {
		const d = new Date(t * 1000);
		const hm = d.toLocaleTimeString("en-GB", opts);
		return i === 0 ? hm + "\n" + d.toLocaleDateString("en-CA") : hm;
	});
}

function updateRates(s) {
	const t = s.time; // the exporter's wall clock (seconds since the epoch) at the poll
	if (!t || !s.totals) return;
	rateData[0].push(t);
	rateData[1].push(s.totals.rx_pps);
	rateData[2].push(s.totals.tx_pps);
	rateData[3].push(s.totals.drop_pps);
	while (rateData[0][0] < t - WINDOW_S) for (const a of rateData) a.shift();
	const box = $("#rates-chart");
	if (!rateChart) {
		rateChart = new uPlot({
			width: chartWidth(box), height: 200,
			// the 5 minutes up to the last poll, from the data: uPlot widens a
			// single point's range to 1,000 days (a day, counted in ms) before this
			scales: {
				x: { time: true, range: () => [rateData[0].at(-1) - WINDOW_S, rateData[0].at(-1)] },
				y: { range: (u, lo, hi) => [0, Math.max(10, hi * 1.1)] },
			},
			legend: { live: false },
			axes: [{ values: clockLabels, space: 70 }, { label: "packets/s", values: (u, v) => v.map((x) => fmt(x)) }],
			series: [{}, { label: "rx", stroke: "#4a6fa5", width: 2 },
				{ label: "tx", stroke: "#2e9e5b", width: 2 },
				{ label: "dropped", stroke: "#c8372d", width: 2 }],
		}, rateData, box);
	} else {
		rateChart.setData(rateData);
	}
}

// The latency histograms: SVG drawn here (log x, one bar per bucket of the
// manager's), every label inside the chart and none under the title.
const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
	const e = document.createElementNS(SVG_NS, tag);
	for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
	if (text !== undefined) e.textContent = text;
	return e;
}
const usLabel = (us) => us >= 1e6 ? us / 1e6 + " s" : us >= 1e3 ? us / 1e3 + " ms" : us + " \u00b5s";
const niceCeil = (v) => {
	const p = 10 ** Math.floor(Math.log10(v));
	return [1, 2, 5, 10].find((m) => m * p >= v) * p;
};

function drawHist(wrap, c, width) {
	const H = 200, pad = { l: 64, r: 24, t: 10, b: 40 };
	const bars = c.hist.filter((b) => b[0] > 0);
	const lo = bars.length ? Math.floor(Math.log10(bars[0][0])) : 0;
	const hi = bars.length ? Math.max(lo + 1, Math.ceil(Math.log10(bars.at(-1)[0]))) : 3;
	const ymax = niceCeil(Math.max(1, ...bars.map((b) => b[1])));
	const x = (us) => pad.l + (Math.log10(us) - lo) / (hi - lo) * (width - pad.l - pad.r);
	const y = (n) => H - pad.b - n / ymax * (H - pad.t - pad.b);
	const g = svg("svg", { class: "hist-plot", width, height: H, viewBox: `0 0 ${width} ${H}` });
	for (let e = lo; e <= hi; e++) {
		g.append(svg("line", { class: "grid", x1: x(10 ** e), x2: x(10 ** e), y1: pad.t, y2: H - pad.b }));
		g.append(svg("text", { class: "x-label", x: x(10 ** e), y: H - pad.b + 14, "text-anchor": "middle" }, usLabel(10 ** e)));
	}
	for (const n of ymax > 1 ? [0, ymax / 2, ymax] : [0, 1]) {
		g.append(svg("line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: y(n), y2: y(n) }));
		g.append(svg("text", { class: "y-label", x: pad.l - 6, y: y(n) + 4, "text-anchor": "end" }, fmt(n, n % 1 ? 1 : 0)));
	}
	g.append(svg("text", { class: "axis-title", x: (pad.l + width - pad.r) / 2, y: H - 4, "text-anchor": "middle" }, "latency (bucket upper edge)"));
	g.append(svg("text", { class: "axis-title", transform: `translate(14 ${(pad.t + H - pad.b) / 2}) rotate(-90)`, "text-anchor": "middle" }, "packets"));
	for (const [us, n] of bars) {
		const left = Math.max(pad.l, x(us / 2 ** (1 / 16))), right = x(us);
		const bar = svg("rect", { class: "bar", x: left, y: y(n), width: Math.max(1, right - left - 0.5), height: H - pad.b - y(n) });
		bar.append(svg("title", {}, `up to ${fmt(us, 1)} \u00b5s: ${int(n)} packets`));
		g.append(bar);
	}
	wrap.replaceChildren(el("div", { class: "hist-title", text: `${c.name}: packets by rx-to-tx latency` }), g);
}

function updateHists(s) {
	const box = $("#hists");
	const width = Math.max(360, Math.floor(box.clientWidth / 2) - 12);
	const seen = new Set();
	for (const c of s.chains) {
		seen.add(c.name);
		let wrap = box.querySelector(`.hist[data-chain="${CSS.escape(c.name)}"]`);
		if (!wrap) box.append(wrap = el("div", { class: "hist", "data-chain": c.name }));
		drawHist(wrap, c, width);
	}
	for (const w of box.querySelectorAll(".hist")) if (!seen.has(w.dataset.chain)) w.remove();
}

// ------------------------------------------------------------------ tables

function fillTable(sel, rows) {
	const body = $(sel + " tbody");
	body.replaceChildren(...rows);
}

function tr(cells, attrs = {}) {
	const row = el("tr", attrs);
	for (const c of cells) {
		if (c instanceof Node) row.append(el("td", {}, c));
		else if (typeof c === "object") row.append(el("td", { class: c.num ? "num" : "", text: c.text }));
		else row.append(el("td", { text: String(c) }));
	}
	return row;
}
const num = (text) => ({ num: true, text });

function renderTables(s) {
	const all = $("#drops-all").checked;
	fillTable("#drops", s.drops.filter((d) => all || d.pkts > 0).map((d) =>
		tr([d.cause, d.what, num(int(d.pkts)), num(fmt(d.pps))], { class: d.pkts > 0 ? "nonzero" : "", "data-cause": d.cause })));
	fillTable("#chains", s.chains.map((c) =>
		tr([c.name, c.hops.join(" \u2192 "), num(fmt(c.rx_pps)), num(fmt(c.tx_pps)), num(fmt(c.p50_us, 1)), num(fmt(c.p99_us, 1)), num(fmt(c.p999_us, 1))], { "data-chain": c.name })));
	fillTable("#services", s.services.map((v) =>
		tr([v.name, stateChips(v.states), num(fmt(v.rx_pps)), num(fmt(v.tx_pps)), num(fmt(v.wakes_ps))], { "data-service": v.name })));
	fillTable("#ports", s.ports.map((p) =>
		tr([p.name, num(fmt(p.rx_pps)), num(fmt(p.tx_pps)), num(int(p.rx_pkts)), num(int(p.tx_pkts)), num(int(p.rx_missed))], { "data-port": p.name })));
	fillTable("#pools", s.pools.map((p) =>
		tr([p.name, num(int(p.size)), num(int(p.started)), num(int(p.idle)), num(int(p.assigned)), num(int(p.empty))])));
	const f = s.flows || {};
	$("#flows").textContent = `flows: ${int(f.flows_active)} active, ${int(f.flows_created)} created, ${int(f.flows_closed)} closed, ${int(f.flows_idle_expired)} expired`;
	const sel = $("#nf-service");
	const have = new Set([...sel.options].map((o) => o.value));
	for (const v of s.services) if (!have.has(v.name)) sel.append(el("option", { value: v.name, text: v.name }));
}

function renderEvents(events) {
	const list = $("#events");
	list.replaceChildren(...events.slice().reverse().map((e) => {
		const t = new Date(e.time * 1000).toLocaleTimeString("en-GB");
		const down = e.kind === "manager" && e.what.startsWith("manager down");
		return el("li", { class: "ev-" + e.kind + (down ? " ev-manager-down" : ""), "data-kind": e.kind },
			el("span", { class: "muted", text: t + " " }), el("span", { class: "ev-kind", text: e.kind }), e.what);
	}));
}

// --------------------------------------------------------------------- NFs

const nfView = { page: 0, per_page: 50, pending: false };

async function loadNfs() {
	if (nfView.pending) return;
	nfView.pending = true;
	const q = new URLSearchParams({
		q: $("#nf-search").value, service: $("#nf-service").value, state: $("#nf-state").value,
		sort: $("#nf-sort").value, page: nfView.page, per_page: nfView.per_page,
	});
	try {
		const r = await (await fetch("/api/nfs?" + q)).json();
		const pages = Math.max(1, Math.ceil(r.total / nfView.per_page));
		if (nfView.page >= pages) nfView.page = pages - 1;
		$("#nf-page").textContent = ` page ${r.page + 1} of ${pages} `;
		$("#nf-count").textContent = `${int(r.total)} match`;
		fillTable("#nfs", r.rows.map((n) => tr([num(int(n.id)), n.name, num(int(n.pid)),
			el("span", { class: "state state-" + n.state, text: n.state }), n.mode,
			num(fmt(n.rx_pps)), num(int(n.rx_pkts)), num(fmt(n.wakes_ps)), num(int(n.ring)),
			n.ring_full ? el("span", { class: "ring-full", text: "ring full" }) : "", num(int(n.restarts))],
		{ "data-nf": n.name, "data-state": n.state, "data-pid": String(n.pid), "data-ring-full": n.ring_full ? "1" : "0" })));
	} finally {
		nfView.pending = false;
	}
}

for (const id of ["#nf-search", "#nf-service", "#nf-state", "#nf-sort"]) {
	$(id).addEventListener("input", () => { nfView.page = 0; loadNfs(); });
}
$("#nf-prev").addEventListener("click", () => { nfView.page = Math.max(0, nfView.page - 1); loadNfs(); });
$("#nf-next").addEventListener("click", () => { nfView.page += 1; loadNfs(); });

// ------------------------------------------------------------------ stream

let last = null;

function render(s) {
	last = s;
	const badge = $("#status");
	badge.className = "badge " + (s.up ? "up" : "down");
	badge.textContent = s.up ? "up" : "down";
	badge.dataset.up = s.up ? "1" : "0";
	$("#manager").textContent = s.up ? `manager pid ${s.pid}, poll ${(s.poll_s * 1000).toFixed(0)} ms` : s.error;
	renderEvents(s.events);
	if (!s.up || !s.totals) return;
	const t = s.totals;
	setValue("tile-rx-pps", t.rx_pps, fmt(t.rx_pps));
	setValue("tile-tx-pps", t.tx_pps, fmt(t.tx_pps));
	setValue("tile-drop-pps", t.drop_pps, fmt(t.drop_pps));
	setValue("tile-nfs", t.nfs_live, `${int(t.nfs_live)} / ${int(t.nfs_total)}`);
	setValue("tile-mbufs", t.mbufs_in_use, `${int(t.mbufs_in_use)} / ${int(t.mbufs_total)}`);
	setValue("tile-flows", (s.flows || {}).flows_active || 0, int((s.flows || {}).flows_active || 0));
	renderTopology(s);
	renderTables(s);
	updateRates(s);
	updateHists(s);
	loadNfs();
	document.body.dataset.seq = String(s.seq);
}

$("#drops-all").addEventListener("change", () => last && renderTables(last));

// The stream closes while the page is hidden and opens again when it shows.
let stream = null;

function connect() {
	if (stream) return;
	stream = new EventSource("/api/stream");
	stream.addEventListener("summary", (e) => render(JSON.parse(e.data)));
	stream.onerror = () => {
		const badge = $("#status");
		badge.className = "badge down";
		badge.textContent = "no exporter";
	};
}

async function snapshot() {
	render(await (await fetch("/api/summary")).json());
	$("#manager").textContent += `, snapshot at ${new Date().toLocaleTimeString("en-GB")}`;
}

if (SNAPSHOT) {
	snapshot();
} else {
	document.addEventListener("visibilitychange", () => {
		if (!document.hidden) connect();
		else if (stream) {
			stream.close();
			stream = null;
		}
	});
	connect();
}
