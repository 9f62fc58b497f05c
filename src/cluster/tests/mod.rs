mod hostlist;
mod peers;
mod rounds;
mod schedule;
mod sim;
mod topology;
