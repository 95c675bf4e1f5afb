# Plots berth-replay's curves (bench/replay): for each trace, the GPU
# allocation ratio and the fragmented GPUs by arrived workload (measure a,
# with FGD's published points), and GPU utilisation over simulated time
# (measure b). `make replay` runs it as
#   gnuplot -e "data='<plot_data_dir>'; out='bench/results'" bench/replay/plot.gp
if (!exists("data")) data = "build-replay/replay-data"
if (!exists("out")) out = "bench/results"

# Weng et al., "Beware of Fragmentation" (USENIX ATC'23): FGD at 100% / 130%.
fgd100(trace) = trace eq "default" ? 95.23 : 87.84
fgd130(trace) = trace eq "default" ? 95.39 : 94.55

set terminal pngcairo size 900,560 noenhanced font ",11"
set key left top
set grid

do for [trace in "default gpuspec33"] {
  alloc = sprintf("%s/alloc_%s.dat", data, trace)
  set xrange [*:*]
  stats alloc skip 1 nooutput
  columns = STATS_columns

  set output sprintf("%s/replay_alloc_%s.png", out, trace)
  set title sprintf("GPU allocation ratio, %s (1,213 GPU nodes; mean of the seeds)", trace)
  set xlabel "arrived GPU request (% of capacity)"
  set ylabel "allocated GPUs (% of capacity)"
  set xrange [50:130]
  set yrange [50:100]
  plot for [c=2:columns] alloc using 1:c with linespoints title columnhead(c), \
       '+' every ::0::0 using (100):(fgd100(trace)) with points pt 7 ps 1.6 lc "black" \
       title "FGD (published)", \
       '+' every ::0::0 using (130):(fgd130(trace)) with points pt 7 ps 1.6 lc "black" notitle

  set output sprintf("%s/replay_frag_%s.png", out, trace)
  set title sprintf("Fragmented GPUs (FGD's measure), %s", trace)
  set ylabel "fragmented free GPUs (% of capacity)"
  set xrange [10:130]
  set yrange [0:*]
  plot for [c=2:columns] sprintf("%s/frag_%s.dat", data, trace) using 1:c with linespoints \
       title columnhead(c)

  util = sprintf("%s/util_%s.dat", data, trace)
  if (strlen(system("ls ".util." 2>/dev/null")) > 0) {
    set xrange [*:*]
    set yrange [0:100]
    stats util skip 1 nooutput
    set output sprintf("%s/replay_util_%s.png", out, trace)
    set title sprintf("GPU utilisation over time, %s (arrival/departure replay, compressed)", trace)
    set xlabel "simulated time (hours)"
    set ylabel "allocated GPUs (% of capacity)"
    plot for [c=2:STATS_columns] util using 1:c with lines title columnhead(c)
  }
}
