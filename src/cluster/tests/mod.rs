mod hostlist;
mod peers;
mod rounds;
mod schedule;
mod topology;
