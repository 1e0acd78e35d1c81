// How values are written in the console.

export function time(t) {
  return t ? new Date(t).toLocaleString() : '';
}

// shortTime is a time in a table's cell: to the minute (the title, on
// hover, has the seconds).
export function shortTime(t) {
  return t ? <time dateTime={t} title={time(t)}>{new Date(t).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' })}</time> : '';
}

export function bytes(n) {
  if (n === undefined || n === null) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export const terminal = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation']);

// waiting are the phases of a backup or restore whose run has not started
// (Velero's, Backstop's queue, and a NonAdminBackup's own before its
// backup has one).
export const waiting = new Set(['', 'New', 'Queued', 'ReadyToStart', 'Created', 'BackingOff']);

// stamp is a time as Velero stamps names: yyyyMMddHHmmss, UTC.
export function stamp(d) {
  return d.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}
