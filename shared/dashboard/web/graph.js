// The step graph: one node per step of the playbook's outline (a loop is one
// node showing done/total, however many iterations it runs), one edge per
// arc, laid out by dagre when the binary has it. Layout happens once per
// playbook; state changes only restyle the nodes.

const SVG = 'http://www.w3.org/2000/svg';
const NODE_W = 160;
const NODE_H = 48;
const LABEL_H = 14;
const LABEL_CHARS = 24;
// The graph shrinks to fit its pane down to this scale; a larger graph
// keeps it and the pane scrolls.
const MIN_SCALE = 0.55;

// labelText is an arc's when as its label shows it: the expression without
// its {{ }}, shortened; the whole condition is in its tooltip.
function labelText(when) {
  if (!when) return '';
  const m = /^\s*\{\{(.*)\}\}\s*$/s.exec(when);
  const text = (m ? m[1] : when).trim();
  return text.length > LABEL_CHARS ? text.slice(0, LABEL_CHARS - 1) + '…' : text;
}

// labelWidth: about 6 px a character at the labels' 10 px font, with padding.
function labelWidth(text) { return Math.ceil(text.length * 6 + 8); }

function el(name, attrs = {}, parent) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

// layout returns node centres and edge polylines. Without the layout library
// (a binary built without `make dashboard`) the steps stand in one column in
// workflow order, edges drawn straight.
function layout(steps, dagre, direction) {
  const pos = new Map();
  const edges = [];
  if (dagre) {
    const g = new dagre.graphlib.Graph({ multigraph: false });
    g.setGraph({ rankdir: direction, nodesep: 18, ranksep: 40, edgesep: 8, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const s of steps) g.setNode(s.name, { width: NODE_W, height: NODE_H });
    // A labelled edge reserves room for its label, so no node covers it.
    for (const s of steps) for (const a of s.next) {
      if (!g.hasNode(a.to)) continue;
      const label = labelText(a.when);
      g.setEdge(s.name, a.to, label ? { when: a.when, label, width: labelWidth(label), height: LABEL_H, labelpos: 'c' } : { when: '' });
    }
    dagre.layout(g);
    for (const n of g.nodes()) pos.set(n, { x: g.node(n).x, y: g.node(n).y });
    for (const e of g.edges()) {
      const d = g.edge(e);
      edges.push({ from: e.v, to: e.w, points: d.points, when: d.when, at: d.label ? { x: d.x, y: d.y } : null });
    }
    const gr = g.graph();
    return { pos, edges, width: gr.width, height: gr.height };
  }
  steps.forEach((s, i) => pos.set(s.name, { x: 12 + NODE_W / 2, y: 12 + NODE_H / 2 + i * (NODE_H + 30) }));
  for (const s of steps) for (const a of s.next) {
    if (!pos.has(a.to)) continue;
    const p = pos.get(s.name), q = pos.get(a.to);
    edges.push({ from: s.name, to: a.to, when: a.when || '', points: [{ x: p.x, y: p.y + NODE_H / 2 }, { x: q.x, y: q.y - NODE_H / 2 }] });
  }
  return { pos, edges, width: NODE_W + 24, height: steps.length * (NODE_H + 30) + 24 };
}

export class StepGraph {
  // container: the element to draw in; onSelect(name) when a step is chosen.
  // direction: LR, TB, or auto (the default): whichever of the two is
  // drawn larger in the container's width.
  constructor(container, outline, { dagre, direction = 'auto', onSelect }) {
    this.nodes = new Map();
    this.onSelect = onSelect;
    let chosen = direction;
    let lay;
    if (direction === 'auto') {
      const room = container.clientWidth || Infinity;
      const fit = (l) => Math.min(1, room / l.width);
      const lr = layout(outline.steps, dagre, 'LR');
      const tb = dagre ? layout(outline.steps, dagre, 'TB') : lr;
      [chosen, lay] = fit(tb) > fit(lr) + 0.05 ? ['TB', tb] : ['LR', lr];
    } else {
      lay = layout(outline.steps, dagre, direction);
    }
    this.direction = chosen;
    const { pos, edges, width, height } = lay;
    const svg = el('svg', { width: Math.ceil(width), height: Math.ceil(height), viewBox: `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`,
      role: 'group', 'aria-label': 'Step graph', 'data-direction': chosen });
    const defs = el('defs', {}, svg);
    const marker = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, defs);
    el('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#8c959f' }, marker);
    const labels = [];
    for (const e of edges) {
      const g = el('g', { class: 'edge', 'data-from': e.from, 'data-to': e.to }, svg);
      const d = e.points.map((p, i) => `${i ? 'L' : 'M'} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`).join(' ');
      el('path', { d, 'marker-end': 'url(#arrow)' }, g);
      if (e.when) labels.push(e);
    }
    for (const s of outline.steps) {
      const p = pos.get(s.name);
      const g = el('g', { class: 'node notreached', transform: `translate(${p.x - NODE_W / 2},${p.y - NODE_H / 2})`,
        tabindex: 0, role: 'button', 'data-step': s.name });
      el('rect', { width: NODE_W, height: NODE_H, rx: 6 }, g);
      const name = el('text', { x: 8, y: 18 }, g);
      name.textContent = s.name.length > 22 ? s.name.slice(0, 21) + '…' : s.name;
      const sub = el('text', { x: 8, y: 36, class: 'sub' }, g);
      const title = el('title', {}, g);
      g.addEventListener('click', () => this.onSelect(s.name));
      g.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); this.onSelect(s.name); }
      });
      svg.appendChild(g);
      this.nodes.set(s.name, { g, sub, title, step: s });
    }
    // Labels last, on a background: drawn over whatever they cross.
    for (const e of labels) {
      const text = labelText(e.when);
      const mid = e.at || e.points[Math.floor(e.points.length / 2)];
      const w = labelWidth(text);
      const g = el('g', { class: 'edge-label', 'data-from': e.from, 'data-to': e.to,
        transform: `translate(${(mid.x - w / 2).toFixed(1)},${(mid.y - LABEL_H / 2).toFixed(1)})` }, svg);
      el('rect', { width: w, height: LABEL_H, rx: 3 }, g);
      const t = el('text', { x: 4, y: LABEL_H - 3 }, g);
      t.textContent = text;
      el('title', {}, g).textContent = `when ${e.when}`;
    }
    // Fit the pane: the drawing shrinks with it (viewBox), down to MIN_SCALE,
    // then keeps that size and the pane scrolls.
    svg.style.maxWidth = '100%';
    svg.style.height = 'auto';
    svg.style.minWidth = `${Math.ceil(width * MIN_SCALE)}px`;
    container.replaceChildren(svg);
    this.svg = svg;
  }

  // update restyles every node: states maps a step to {state, attempts,
  // progress: {done, total, unit}} (unit: iterations, or rows done of those a
  // cursor loop claimed so far); a step missing from it has not been reached.
  update(states, selected) {
    for (const [name, n] of this.nodes) {
      const st = states[name] || { state: 'notreached' };
      n.g.setAttribute('class', `node ${st.state}${name === selected ? ' selected' : ''}`);
      n.g.setAttribute('data-state', st.state);
      const parts = [n.step.tool + (n.step.loop ? ' loop' : ''), stateLabel(st.state)];
      if (st.progress) parts.push(`${st.progress.done}/${st.progress.total}` + (st.progress.unit === 'rows' ? ' rows' : ''));
      if (st.attempts > 1) parts.push(`×${st.attempts}`);
      n.sub.textContent = parts.join(' · ');
      // A line longer than the node is pressed into it, never cut.
      n.sub.removeAttribute('textLength');
      if (n.sub.getComputedTextLength() > NODE_W - 12) {
        n.sub.setAttribute('textLength', NODE_W - 12);
        n.sub.setAttribute('lengthAdjust', 'spacingAndGlyphs');
      }
      const label = `step ${name}: ${stateLabel(st.state)}` + (st.progress ? `, ${st.progress.done} of ${st.progress.total} ${st.progress.unit || 'iterations'}` : '') +
        (st.attempts > 1 ? `, ${st.attempts} attempts` : '');
      n.g.setAttribute('aria-label', label);
      n.g.setAttribute('aria-pressed', name === selected ? 'true' : 'false');
      n.title.textContent = label;
    }
  }
}

export const STATES = ['notreached', 'running', 'completed', 'failed', 'skipped', 'cancelled'];

export function stateLabel(s) {
  return s === 'notreached' ? 'not reached' : s;
}
