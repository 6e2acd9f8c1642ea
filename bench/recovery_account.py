#!/usr/bin/env python3
"""The per-phase account of one Figure 6 recovery and of its floor, from a scheduler
trace and the orphans' own timestamps (bench/recovery_trace.sh runs both).

  recovery_account.py TRACE TIMELINE OUT_DIR

TRACE is `perf script -F comm,pid,tid,cpu,time,event,trace` of a `perf record` of
sched_switch, sched_waking, sched_stat_runtime, sched_process_fork and
sched_process_exec over one `canopy-recovery-bench --only recovery --reps 1
--standby on --timeline TIMELINE` (one Canopy storm, then the floor's). Writes
OUT_DIR/account.csv (system, role, processes, cpu_ms, runs), account.txt (the same as
a table, with the phases), and the data files recovery_trace.sh draws.

Each storm's window runs from the kill (the victim's wake-up by its killer) to the
front-end's receipt of the last orphan's report. Roles: the victim; the orphans
(back-ends the victim started, or the floor's orphan processes); the adopters (the
other commnodes, or the floor's adopter processes); the other back-ends; the
front-end (the benchmark's process, all its threads); everything else (kernel
threads, other programs on the machine).
"""
import collections
import csv
import re
import sys

LINE = re.compile(r'^\s*(.*?)\s+(-?\d+)/(-?\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+?):\s+(.*)$')


def read_trace(path):
    events = []
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if m:
                comm, pid, tid, cpu, t, name, rest = m.groups()
                events.append((float(t), int(pid), int(tid), comm, name.split(':')[-1], rest))
    return events


def field(rest, key):
    m = re.search(r'(?:^|\s)' + key + r'=(\S+)', rest)
    return m.group(1) if m else None


class Processes:
    """Who is who: thread -> process, process -> parent and program name."""

    def __init__(self, events):
        self.tgid = {}
        self.parent = {}
        self.name = {}
        for t, pid, tid, comm, name, rest in events:
            if pid > 0:
                self.tgid[tid] = pid
                self.name[pid] = comm
            if name == 'sched_process_fork':
                child = int(field(rest, 'child_pid'))
                # A new process (not a thread) is told apart when it runs: its tid is its pid.
                self.parent.setdefault(child, pid)
            if name == 'sched_process_exec':
                self.name[pid] = comm

    def process(self, tid):
        return self.tgid.get(tid, tid)


def storms(events, procs):
    """[(system, victim, kill time)]: the first Canopy commnode and the first floor
    process to die, each with the moment its killer woke it."""
    found = []
    for system, program in (('canopy', 'canopy-commnode'), ('floor', 'canopy-storm-fl')):
        died = None
        for t, pid, tid, comm, name, rest in events:
            if name == 'sched_switch' and field(rest, 'prev_state') in ('Z', 'X') and \
                    rest.split('prev_comm=')[1].startswith(program):
                died = (int(field(rest, 'prev_pid')), t)
                break
        if not died:
            continue
        victim, zombie = died
        kill = None
        for t, pid, tid, comm, name, rest in events:
            if t > zombie:
                break
            if name == 'sched_waking' and int(field(rest, 'pid')) == victim and procs.process(tid) != victim:
                kill = t
        if kill is not None:
            found.append((system, victim, kill, zombie))
    return found


def role_of(procs, system, victim, tid):
    p = procs.process(tid)
    name = procs.name.get(p, '')
    if p == victim:
        return 'victim'
    if system == 'canopy':
        if name.startswith('canopy-demo-bac'):
            return 'orphans' if procs.parent.get(p) == victim else 'other back-ends'
        if name.startswith('canopy-commnode'):
            return 'adopters'
        if name.startswith('canopy-recovery'):
            return 'front-end'
        return 'other'
    if name.startswith('canopy-storm-fl'):
        # The floor: the front-end forked the victim first, then the adopters, then the orphans.
        return procs.floor_role.get(p, 'front-end')
    return 'other'


def floor_roles(procs, events, victim):
    """The floor's processes by the order the front-end forked them (storm_floor.cpp)."""
    front = procs.parent.get(victim)
    children = [child for t, pid, tid, comm, name, rest in events if name == 'sched_process_fork'
                for child in [int(field(rest, 'child_pid'))] if pid == front]
    roles = {front: 'front-end', victim: 'victim'}
    after = children[children.index(victim) + 1:] if victim in children else []
    for i, c in enumerate(after):
        roles[c] = 'adopters' if i < 16 else 'orphans'
    return roles


def main():
    trace, timeline_path, out = sys.argv[1:4]
    events = read_trace(trace)
    procs = Processes(events)
    timeline = collections.defaultdict(list)
    with open(timeline_path) as f:
        for row in csv.DictReader(f):
            timeline['canopy' if row['system'].startswith('canopy') else 'floor'].append(row)
    rows, text = [], []
    for system, victim, kill, zombie in storms(events, procs):
        if system == 'floor':
            procs.floor_role = floor_roles(procs, events, victim)
        orphans = timeline[system]
        if not orphans:
            continue
        end = kill + max(float(o['report_ms']) for o in orphans) / 1e3
        cpu = collections.defaultdict(float)
        runs = collections.Counter()
        members = collections.defaultdict(set)
        for t, pid, tid, comm, name, rest in events:
            if t < kill or t > end:
                continue
            if name == 'sched_stat_runtime':
                who = int(field(rest, 'pid'))
                role = role_of(procs, system, victim, who)
                cpu[role] += int(field(rest, 'runtime')) / 1e6
                members[role].add(procs.process(who))
            elif name == 'sched_switch':
                who = int(field(rest, 'next_pid'))
                if who != 0:
                    role = role_of(procs, system, victim, who)
                    runs[role] += 1
                    members[role].add(procs.process(who))
        window = (end - kill) * 1e3
        text.append(f'{system}: from the kill to the last report {window:.1f} ms; the victim exited after '
                    f'{(zombie - kill) * 1e3:.1f} ms')

        def spread(key):
            v = sorted(float(o[key]) for o in orphans if o[key] != '')
            return (v[0], v[len(v) // 2], v[-1]) if v else None
        for key, what in (('detect_ms', "found its parent lost"), ('request_ms', 'sent its adoption request'),
                          ('answer_ms', "read the adopter's answer"), ('state_ms', 'sent its state'),
                          ('report_ms', "front-end read its report")):
            s = spread(key)
            if s:
                text.append(f'  orphan {what:<28} first {s[0]:7.2f}  median {s[1]:7.2f}  last {s[2]:7.2f} ms')
        text.append(f'  {"role":<16} {"processes":>9} {"cpu ms":>8} {"runs":>6} {"us a run":>9}')
        for role in ('victim', 'orphans', 'adopters', 'other back-ends', 'front-end', 'other'):
            if role not in cpu and role not in runs:
                continue
            n = len(members[role])
            text.append(f'  {role:<16} {n:>9} {cpu[role]:8.2f} {runs[role]:6d} '
                        f'{1e3 * cpu[role] / max(runs[role], 1):9.1f}')
            rows.append((system, role, n, round(cpu[role], 3), runs[role], round(window, 3)))
        total = sum(cpu.values())
        text.append(f'  {"all":<16} {"":>9} {total:8.2f} {sum(runs.values()):6d}   '
                    f'({total / window:.2f} cores busy of 2)')
    with open(f'{out}/account.csv', 'w') as f:
        f.write('system,role,processes,cpu_ms,runs,window_ms\n')
        for r in rows:
            f.write(','.join(str(x) for x in r) + '\n')
    with open(f'{out}/account.txt', 'w') as f:
        f.write('\n'.join(text) + '\n')
    # For the figure: each orphan's times, ordered by detection, a file per system.
    for system, orphans in timeline.items():
        with open(f'{out}/timeline-{system}.dat', 'w') as f:
            for i, o in enumerate(sorted(orphans, key=lambda o: float(o['detect_ms']))):
                f.write(f"{i} {o['detect_ms']} {o['answer_ms'] or '-'} {o['report_ms']}\n")
    roles = ['victim', 'orphans', 'adopters', 'other back-ends', 'front-end', 'other']
    with open(f'{out}/cpu.dat', 'w') as f:
        by = {(r[0], r[1]): r[3] for r in rows}
        for role in roles:
            f.write(f'"{role}" {by.get(("canopy", role), 0)} {by.get(("floor", role), 0)}\n')
    print('\n'.join(text))


if __name__ == '__main__':
    main()
