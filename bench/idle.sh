# Sourced by the bench scripts that wait for a quiet machine before they
# measure.
idle_pct() { # whole-machine idle share over 2 s
    local a b c d e f g h busy1 idle1
    read -r _ a b c d e f g h _ < /proc/stat; busy1=$((a+b+c+f+g+h)); idle1=$((d+e))
    sleep 2
    read -r _ a b c d e f g h _ < /proc/stat
    echo $(( 100 * (d+e-idle1) / (d+e-idle1 + a+b+c+f+g+h-busy1 + 1) ))
}
