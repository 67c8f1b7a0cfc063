# %% [markdown]
# # memlens in a notebook
#
# Why did this run out of memory? Each cell below is what you would type in Jupyter; run the
# file as a script (`python examples/notebook.py [SNAPSHOT] [OTHER]`) to see the same answers
# as text. In Jupyter, the last expression of a cell renders as a table, and `snap` alone
# shows the whole report page inline. `to_pandas()` needs `pip install 'memlens[pandas]'`.

# %%
import sys
from pathlib import Path

import memlens

here = Path(__file__).resolve().parent.parent
path = sys.argv[1] if len(sys.argv) > 1 else here / "samples" / "captured" / "frag_oom.pickle"
other = sys.argv[2] if len(sys.argv) > 2 else here / "samples" / "captured" / "frag_oom_expandable.pickle"
snap = memlens.open(path)

# %% The OOM first: its four numbers and the cause.
oom = snap.oom()
for row in oom.rows:
    print(f"OOM at event {row['event_index']}: {row['verdict']}: {row['headline']}")

# %% Where the memory was at the peak, as a DataFrame.
top = snap.top().to_pandas()
print(top[["site", "bytes", "count"]].head(5).to_string(index=False))
print("top sites hold", memlens.format_size(int(top["bytes"].sum())))

# %% What to change first, with what each fix saves.
for fix in snap.fit().rows[:3]:
    print(f"fix {fix['id']} ({fix['cost']}): saves {memlens.format_size(fix['saves_bytes'])}")

# %% By kind, and over time.
print(snap.categories().to_pandas()[["category", "bytes"]].to_string(index=False))
timeline = snap.timeline().to_pandas()
print("timeline points:", len(timeline), "peak live:", memlens.format_size(int(timeline["live_requested_bytes"].max())))

# %% Against the same workload under expandable_segments:True (captured on an H200).
changed = snap.diff(other)
print("peak change:", memlens.format_size(changed["peak"]["delta_bytes"]), "sites changed:", len(changed.rows))
for line in changed.data.get("observations", []):
    print("-", line)
