mod hostlist;
mod peers;
mod topology;
