# bench/plot.gp - the chart of bench/run.sh (bench/results.png).
#
#   gnuplot -e "datafile='plot.dat'; outfile='results.png'; subtitle='...'" bench/plot.gp
#
# datafile: '#' comment lines, then one line per scenario, tab-separated:
#   "label" then four median wall times in seconds (stager, rsync -a, tar -x,
#   cp -r) then the four tools' median shared-FS metadata operations; '?'
#   where a tool does not take part.  Two panels, both log scale: time on
#   top, shared-FS metadata operations below.
if (!exists("datafile")) datafile = 'plot.dat'
if (!exists("outfile")) outfile = 'results.png'
if (!exists("subtitle")) subtitle = ''

set terminal pngcairo size 1600,1000 font "sans,11" noenhanced
set output outfile
set datafile separator "\t"
set datafile missing "?"

set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border rgb "#333333"
set boxwidth 0.9
set grid ytics mytics lc rgb "#dddddd"
set key top left horizontal
set logscale y 10
set format y "%g"
set xtics nomirror scale 0
set ytics nomirror
set border 3
set lmargin 12

# the same colour for a tool in both panels
c_stager = "#1b9e77"; c_rsync = "#d95f02"; c_tar = "#7570b3"; c_cp = "#e7298a"

# clustered bars: 4 per group, a gap of 1 bar, so bar k (0..3) of group j
# is centred at j + (k - 1.5) / 5; the value is printed above it
bx(k) = $0 + (k - 1.5) / 5.0
stats datafile using 0 nooutput
set xrange [-0.6:STATS_records - 0.4]
set bmargin 4

set multiplot layout 2,1 title "stager vs rsync, tar, cp through an emulated NFS mount (bench/sharedfs)\n" . subtitle
set title "wall time, median (s, log scale; lower is better)"
set ylabel "seconds"
set yrange [0.001:1000]
fs(v) = v >= 10 ? sprintf("%.0f", v) : v >= 1 ? sprintf("%.1f", v) : sprintf("%.2g", v)
plot datafile using 2:xtic(1) title "stager" lc rgb c_stager, \
     '' using 3 title "rsync -a" lc rgb c_rsync, \
     '' using 4 title "tar -I zstd -x" lc rgb c_tar, \
     '' using 5 title "cp -r" lc rgb c_cp, \
     for [k=0:3] '' using (bx(k)):(column(k + 2) * 1.25):(fs(column(k + 2))) with labels font ",8" notitle

set title "shared-FS metadata operations, median (log scale; each one a round trip)"
set ylabel "operations"
set yrange [0.5:1e7]
fo(v) = v >= 10000 ? sprintf("%.0fk", v / 1000) : sprintf("%.0f", v)
plot datafile using 6:xtic(1) title "stager" lc rgb c_stager, \
     '' using 7 title "rsync -a" lc rgb c_rsync, \
     '' using 8 title "tar -I zstd -x" lc rgb c_tar, \
     '' using 9 title "cp -r" lc rgb c_cp, \
     for [k=0:3] '' using (bx(k)):(column(k + 6) * 1.25):(fo(column(k + 6))) with labels font ",8" notitle
unset multiplot
