# Shell helpers of the bench scripts; source it from the repository root:
#   . bench/lib.sh

# median reads numbers, one a line, and prints their median (the mean of
# the two middle ones for an even count).
median() { sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m}'; }
