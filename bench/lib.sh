# Shell helpers shared by the benchmark scripts in bench/ (sourced, not run).

# The median of the numbers on standard input, one per line ("" for none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
