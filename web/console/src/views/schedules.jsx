// The schedules view: Velero's Schedules and the tenants'
// NonAdminSchedules, their next runs on a timeline, and pause, unpause
// and trigger as the user's rights allow.
import { useComputed, useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { Cron } from 'croner';
import { useCollection } from '../collection.js';
import { Section, useAction } from '../table.jsx';
import { post, patch } from '../api.js';
import { velero, oadp, can, canRead } from '../context.js';
import { time, shortTime } from '../format.jsx';
import { Phase } from './backups.jsx';

const scheduleKinds = [
  {
    id: 'schedules',
    title: 'Schedules',
    api: velero,
    resource: 'schedules',
    phase: (o) => o.status?.phase || 'New',
    lastBackup: (o) => o.status?.lastBackup,
    lastSkipped: (o) => o.status?.lastSkipped,
    pause: (url, paused) => post(`${url}/${paused ? 'pause' : 'unpause'}`, {}),
    mayPause: () => can('create', 'velero.io', 'schedules/pause') && can('create', 'velero.io', 'schedules/unpause'),
    trigger: (url) => post(`${url}/trigger`, {}),
    mayTrigger: () => can('create', 'velero.io', 'schedules/trigger'),
  },
  {
    id: 'nonadminschedules',
    title: 'Schedules of this namespace (NonAdminSchedules)',
    api: oadp,
    resource: 'nonadminschedules',
    phase: (o) => o.status?.veleroSchedule?.status?.phase || o.status?.phase || 'New',
    lastBackup: (o) => o.status?.veleroSchedule?.status?.lastBackup,
    lastSkipped: (o) => o.status?.veleroSchedule?.status?.lastSkipped,
    pause: (url, paused) => patch(url, { spec: { paused } }),
    mayPause: () => can('patch', 'oadp.openshift.io', 'nonadminschedules'),
  },
];

const everyUnits = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, µs: 1e-3, ns: 1e-6 };

// nextRuns are a schedule's next count runs after now, read as the
// engine reads it (robfig/cron's standard parser: five fields, @every
// <duration>, @daily and the like, a CRON_TZ= or TZ= prefix; UTC
// otherwise, the server's time zone as deployed). [] for a pattern it
// cannot read.
export function nextRuns(pattern, since, now, count) {
  let p = (pattern ?? '').trim();
  let timezone = 'UTC';
  const tz = p.match(/^(?:CRON_TZ|TZ)=(\S+)\s+(.*)$/);
  if (tz) [, timezone, p] = tz;
  const every = p.match(/^@every\s+(.+)$/);
  if (every) {
    let ms = 0;
    const re = /(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g;
    let rest = every[1];
    for (const m of every[1].matchAll(re)) {
      ms += Number(m[1]) * everyUnits[m[2]];
      rest = rest.replace(m[0], '');
    }
    if (!ms || rest.trim()) return [];
    ms = Math.max(1000, Math.round(ms / 1000) * 1000);
    let t = since.getTime() + ms;
    if (t < now.getTime()) t = now.getTime(); // due: runs at once
    const out = [];
    for (let i = 0; i < count; i++) out.push(new Date(t + i * ms));
    return out;
  }
  if (p === '@midnight') p = '@daily';
  // robfig/cron matches a day of the month or of the week when both are
  // restricted, unless one of them starts with "*" (then both must match).
  const fields = p.split(/\s+/);
  const domAndDow = fields.length === 5 && (fields[2].startsWith('*') || fields[4].startsWith('*'));
  try {
    // The engine runs what was due since the last run (or skip, or the
    // creation): a run missed is due now.
    const cron = new Cron(p, { paused: true, timezone, mode: '5-part', domAndDow });
    const [first] = cron.nextRuns(1, since);
    if (!first) return [];
    return first < now ? [now, ...cron.nextRuns(count - 1, now)] : [first, ...cron.nextRuns(count - 1, first)];
  } catch (_) {
    return [];
  }
}

// since is what the engine counts a schedule's next run from: its last
// backup or skipped run, whichever is later, or its creation.
function since(kind, o, now) {
  const times = [kind.lastBackup(o), kind.lastSkipped(o)].filter(Boolean).map((t) => new Date(t));
  return times.length ? new Date(Math.max(...times)) : new Date(o.metadata.creationTimestamp ?? now);
}

const hour = 3600e3;
const span = 48 * hour;

// Timeline draws the next 48 hours' runs of the schedules not paused.
function Timeline({ rows, now }) {
  const width = 920;
  const left = 180;
  const rowH = 22;
  const active = rows.filter((r) => !r.paused).length;
  const shown = rows.filter((r) => !r.paused).slice(0, 15)
    .map((r) => ({ ...r, runs: r.runs.filter((t) => t.getTime() - now.getTime() <= span) }));
  if (!shown.length) return null;
  const x = (t) => left + ((t - now.getTime()) / span) * (width - left - 30);
  const height = 24 + shown.length * rowH;
  const runs = shown.reduce((n, r) => n + r.runs.length, 0);
  const ticks = [];
  for (let h = 0; h <= 48; h += 6) ticks.push(h);
  return (
    <figure class="timeline">
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-labelledby="timeline-caption" data-runs={runs}>
        {ticks.map((h) => (
          <g key={h}>
            <line x1={x(now.getTime() + h * hour)} x2={x(now.getTime() + h * hour)} y1={14} y2={height} class="grid" />
            <text x={x(now.getTime() + h * hour)} y={10} text-anchor="middle" class="axis">{h === 0 ? 'now' : `+${h} h`}</text>
          </g>
        ))}
        {shown.map((r, i) => (
          <g key={r.name} data-schedule={r.name}>
            <text x={left - 8} y={24 + i * rowH + 15} text-anchor="end" class="label">{r.name}</text>
            {r.runs.map((t) => (
              <circle key={t.getTime()} cx={x(t.getTime())} cy={24 + i * rowH + 11} r={5} class="run"><title>{`${r.name}: ${t.toLocaleString()}`}</title></circle>
            ))}
          </g>
        ))}
      </svg>
      <figcaption id="timeline-caption">Runs of the next 48 hours, {runs} in all, of {active > shown.length ? `the first ${shown.length} of the ${active}` : 'the'} schedules not paused</figcaption>
    </figure>
  );
}

function ScheduleSection({ kind }) {
  const collection = useCollection(kind.api.url(kind.resource));
  const { error, run } = useAction();
  const now = useSignal(new Date());
  useEffect(() => {
    const t = setInterval(() => { now.value = new Date(); }, 60e3);
    return () => clearInterval(t);
  }, []);
  const planned = useComputed(() => [...collection.items.value.values()].map((o) => ({
    name: o.metadata.name,
    paused: !!o.spec?.paused,
    runs: nextRuns(o.spec?.schedule, since(kind, o, now.value), now.value, 48),
  })).sort((a, b) => (a.runs[0]?.getTime() ?? Infinity) - (b.runs[0]?.getTime() ?? Infinity) || a.name.localeCompare(b.name)));
  const next = (o) => planned.value.find((r) => r.name === o.metadata.name)?.runs[0];
  const url = (o) => `${kind.api.url(kind.resource)}/${encodeURIComponent(o.metadata.name)}`;
  const columns = [
    { title: 'Name', cell: (o) => o.metadata.name },
    { title: 'Phase', cell: (o) => <Phase phase={kind.phase(o)} /> },
    { title: 'Schedule', cell: (o) => <code>{o.spec?.schedule}</code> },
    { title: 'Paused', cell: (o) => <span data-paused={String(!!o.spec?.paused)}>{o.spec?.paused ? 'Paused' : 'No'}</span> },
    { title: 'Last backup', cell: (o) => shortTime(kind.lastBackup(o)) },
    { title: 'Next run', cell: (o) => (o.spec?.paused ? '' : shortTime(next(o)?.toISOString())) },
    {
      title: 'Actions', hidden: true,
      cell: (o) => {
        const name = o.metadata.name;
        const out = [];
        if (kind.mayPause()) {
          const paused = !!o.spec?.paused;
          out.push(<button type="button" key="pause" aria-label={`${paused ? 'Unpause' : 'Pause'} schedule ${name}`}
            onClick={() => run(`${paused ? 'Unpausing' : 'Pausing'} ${name}`, () => kind.pause(url(o), !paused))}>{paused ? 'Unpause' : 'Pause'}</button>);
        }
        if (kind.mayTrigger?.()) {
          out.push(<button type="button" key="trigger" aria-label={`Back up now with schedule ${name}`}
            onClick={() => run(`Triggering ${name}`, () => kind.trigger(url(o)))}>Back up now</button>);
        }
        return <span class="actions">{out}</span>;
      },
    },
  ];
  return (
    <Section id={kind.id} title={kind.title} collection={collection} columns={columns} error={error}
      order={(a, b) => a.metadata.name.localeCompare(b.metadata.name)} mark={`console:${kind.id}:listed`}>
      <Timeline rows={planned.value} now={now.value} />
    </Section>
  );
}

export function SchedulesView() {
  const shown = scheduleKinds.filter((k) => canRead(k.api.group, k.resource));
  if (!shown.length) return <p>You may not read schedules here.</p>;
  return shown.map((k) => <ScheduleSection key={k.id} kind={k} />);
}
