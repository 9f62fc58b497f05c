mod hostlist;
mod matrix;
mod peers;
mod recheck;
mod rounds;
mod schedule;
mod sim;
mod topology;
