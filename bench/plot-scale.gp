# bench/plot-scale.gp - the chart of bench/scale.sh (bench/results-scale.png).
#
#   gnuplot -e "countfile='count.dat'; sizefile='size.dat'; outfile='results-scale.png'; subtitle='...'" bench/plot-scale.gp
#
# countfile: one line per dataset, tab-separated: files, pack seconds, stage
#   seconds, pack peak RSS (MiB), stage peak RSS (MiB), manifest (MiB),
#   shared-FS metadata operations of the stage.
# sizefile: GiB, pack seconds, stage seconds, pack RSS, stage RSS, metadata
#   operations.
# Four panels, all log-log: time vs files, time vs GiB, peak RSS vs files
# (with the bound 64 MiB + manifest), metadata operations vs files and GiB.
# The dotted lines are linear growth through the largest point: a cost that
# grows linearly runs parallel to them.
if (!exists("countfile")) countfile = 'count.dat'
if (!exists("sizefile")) sizefile = 'size.dat'
if (!exists("outfile")) outfile = 'results-scale.png'
if (!exists("subtitle")) subtitle = ''

set terminal pngcairo size 1400,1000 font "sans,11" noenhanced
set output outfile
set datafile separator "\t"
set logscale xy 10
set format x "%g"
set format y "%g"
set grid xtics ytics mxtics mytics lc rgb "#e4e4e4"
set key top left
set border 3
set xtics nomirror
set ytics nomirror

# the largest point of each series, for the linear reference lines
stats countfile using 1:2 nooutput name "CP"
stats countfile using 1:3 nooutput name "CS"
stats sizefile using 1:2 nooutput name "ZP"
stats sizefile using 1:3 nooutput name "ZS"
lin(x, x1, y1) = y1 * x / x1

set multiplot layout 2,2 title "stager: costs against dataset size\n" . subtitle
set xlabel "files (1-4 KiB each)"
set ylabel "seconds"
set title "time vs number of files"
plot countfile using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "pack (local disk)", \
     countfile using 1:3 with linespoints lw 2 pt 5 lc rgb "#d62728" title "stage, cold (emulated NFS)", \
     lin(x, CP_max_x, CP_max_y) with lines dt 3 lc rgb "#1f77b4" title "linear", \
     lin(x, CS_max_x, CS_max_y) with lines dt 3 lc rgb "#d62728" notitle

set xlabel "GiB"
set title "time vs data size"
plot sizefile using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "pack (local disk)", \
     sizefile using 1:3 with linespoints lw 2 pt 5 lc rgb "#d62728" title "stage, cold (emulated NFS, to disk)", \
     lin(x, ZP_max_x, ZP_max_y) with lines dt 3 lc rgb "#1f77b4" title "linear", \
     lin(x, ZS_max_x, ZS_max_y) with lines dt 3 lc rgb "#d62728" notitle

set xlabel "files (1-4 KiB each)"
set ylabel "MiB"
set title "peak RSS vs number of files"
plot countfile using 1:4 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "pack", \
     countfile using 1:5 with linespoints lw 2 pt 5 lc rgb "#d62728" title "stage", \
     countfile using 1:6 with linespoints lw 1 pt 1 lc rgb "#7f7f7f" title "manifest (decoded)", \
     countfile using 1:(64 + $6) with lines dt 2 lw 2 lc rgb "#2ca02c" title "bound: 64 MiB + manifest"

set xlabel "files, or GiB"
set ylabel "operations"
set title "shared-FS metadata operations of a cold stage"
set yrange [1:1000]
plot countfile using 1:7 with linespoints lw 2 pt 5 lc rgb "#d62728" title "vs files", \
     sizefile using 1:6 with linespoints lw 2 pt 9 lc rgb "#9467bd" title "vs GiB"
unset multiplot
